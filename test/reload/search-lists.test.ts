/**
 * A reload that hides a tool makes `search_tools` stop finding it at once (issue 41 §6): the
 * tool-search lists a replica keeps per user and session (src/discovery/user-lists.ts) stood
 * for up to 60 s, so a tool hidden by a new `access.tools.deny` or `policy.rules` was still
 * found, with its description and schema, until then. The reload now forgets the lists of the
 * endpoints it may have changed (src/reload/list-changes.ts). `/mcp` and a virtual server with
 * `discovery.threshold: 0` (search always on), in process; a real SDK backend
 * (test/fixtures/virtual-backends.ts `issues`), a real OAuth server.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { startIssuesBackend, type VirtualBackend } from '../fixtures/virtual-backends.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionClient } from '../helpers/session-client.js';

let oauth: OAuthHandle;
let issues: VirtualBackend;
let gateway: GatewayHandle;
let token: string;

const DESK = { name: 'desk', discovery: { threshold: 0 }, tools: [{ from: 'issues.delete_repo' }, { from: 'issues.create_issue' }] };
const EXTRA = { discovery: { threshold: 0 }, servers: [DESK] };

before(async () => {
  [oauth, issues] = await Promise.all([startOAuthServer(), startIssuesBackend()]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'issues', url: issues.url }], overrides: EXTRA });
  token = await oauth.token({ sub: 'searching-user', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([issues?.close(), oauth?.stop()]);
});

/** The gateway's first config with `change` over its top level, as the file would give it. */
function configWith(change: Partial<ConfigInput>): Config {
  const port = Number(new URL(gateway.url).port);
  return parseConfig({ publicUrl: gateway.url, listen: { host: '127.0.0.1', port }, auth: { issuer: oauth.issuer, audience: gateway.audience, algorithms: ['RS256', 'ES256'] }, log: { level: 'silent' }, backends: [{ name: 'issues', url: issues.url }], ...EXTRA, ...change });
}

/** The names `search_tools` finds for the query in a session of `path`. */
async function found(path: string, sessionId: string, query: string): Promise<string[]> {
  const client = sessionClient(() => new URL(`${gateway.url}${path}`), 'reload-search');
  const res = await client.post(token, { jsonrpc: '2.0', id: 's', method: 'tools/call', params: { name: 'search_tools', arguments: { query } } }, sessionId);
  assert.equal(res.status, 200);
  const text = await res.text();
  const json = JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6)) as { result: { structuredContent: { tools: Array<{ name: string }> } } };
  return json.result.structuredContent.tools.map((t) => t.name);
}

const hidden = () => ({ backends: [{ name: 'issues', url: issues.url, access: { tools: { deny: ['delete_repo'] } } }] });

describe('a reload that hides a tool, and search_tools', () => {
  // Each test starts from the first config, whatever the one before left.
  beforeEach(() => void gateway.app.applyConfig(configWith({})));

  test('/mcp: a tool hidden by access.tools.deny is not found by the very next search; shown again, it is found again', async () => {
    const sessionId = await sessionClient(() => new URL(`${gateway.url}/mcp`), 'reload-search').initialize(token);
    assert.ok((await found('/mcp', sessionId, 'delete repository')).includes('issues__delete_repo'), 'found before the reload (the list is now kept)');
    assert.equal(gateway.app.applyConfig(configWith(hidden())), 'applied');
    assert.deepEqual((await found('/mcp', sessionId, 'delete repository')).filter((n) => n.includes('delete_repo')), [], 'hidden at once, no 60 s wait');
    assert.equal(gateway.app.applyConfig(configWith({})), 'applied');
    assert.ok((await found('/mcp', sessionId, 'delete repository')).includes('issues__delete_repo'));
  });

  test('/mcp: a tool hidden by a policy rule is not found by the very next search', async () => {
    const sessionId = await sessionClient(() => new URL(`${gateway.url}/mcp`), 'reload-search').initialize(token);
    assert.ok((await found('/mcp', sessionId, 'delete repository')).includes('issues__delete_repo'));
    const policy = { rules: [{ name: 'no-delete', effect: 'deny' as const, when: 'mcp.tool.name == "delete_repo"' }] };
    assert.equal(gateway.app.applyConfig(configWith({ policy })), 'applied');
    assert.deepEqual((await found('/mcp', sessionId, 'delete repository')).filter((n) => n.includes('delete_repo')), []);
  });

  test('a virtual server offering the tool, itself unchanged: the tool is not found by its next search', async () => {
    const sessionId = await sessionClient(() => new URL(`${gateway.url}/mcp/desk`), 'reload-search').initialize(token);
    assert.ok((await found('/mcp/desk', sessionId, 'delete repository')).includes('delete_repo'));
    assert.equal(gateway.app.applyConfig(configWith(hidden())), 'applied');
    assert.deepEqual((await found('/mcp/desk', sessionId, 'delete repository')).filter((n) => n.includes('delete_repo')), []);
  });
});
