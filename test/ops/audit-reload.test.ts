/**
 * The audit trail and the first `policy.rules` on a reload (issue 32 §1; issue 30 §2–§3;
 * docs/operations-reload.md), in process: the file's new config handed to `app.applyConfig`
 * as config-watch.ts hands it. A gateway started with neither rules nor an audit turns the
 * audit on, moves it to another file with arguments and claims opted in, and takes its first
 * rule, with no restart; the session opened at the start goes on throughout. Real SDK backend
 * (test/fixtures/announcing-backend.ts), real OAuth server, real files.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { waitUntil } from '../helpers/child.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionToolNames } from '../helpers/pages.js';
import { sessionClient } from '../helpers/session-client.js';

let oauth: OAuthHandle;
let alpha: FixtureChild;
let gateway: GatewayHandle;
let token: string;
let dir: string;

before(async () => {
  [oauth, alpha, dir] = await Promise.all([startOAuthServer(), startFixtureChild('announcing-backend.ts'), mkdtemp(join(tmpdir(), 'sb-audit-reload-'))]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'alpha', url: alpha.url }] });
  token = await oauth.token({ sub: 'audited-user', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([alpha?.child.stop(), oauth?.stop()]);
});

function configWith(change: Partial<ConfigInput>): Config {
  const { url, audience } = gateway;
  const port = Number(new URL(url).port);
  return parseConfig({ publicUrl: url, listen: { host: '127.0.0.1', port }, auth: { issuer: oauth.issuer, audience, algorithms: ['RS256', 'ES256'] }, log: { level: 'silent' }, backends: [{ name: 'alpha', url: alpha.url }], ...change });
}

const client = sessionClient(() => gateway.endpoint('alpha'), 'audit-reload-test');

async function announce(sessionId: string, text: string): Promise<string> {
  const res = await client.post(token, { jsonrpc: '2.0', id: text, method: 'tools/call', params: { name: 'announce', arguments: { text } } }, sessionId);
  assert.equal(res.status, 200);
  return res.text();
}

/** The audit records in `file` once it holds `count` of them (written asynchronously). */
async function records(file: string, count: number): Promise<Array<Record<string, unknown>>> {
  const read = async () => (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  await waitUntil(async () => ((await read()).length >= count ? true : undefined), { what: `${count} audit record(s) in ${file}`, timeoutMs: 5_000, intervalMs: 20 });
  return read();
}

test('the audit turns on, moves to another file with arguments and claims, and the first rule applies, without a restart', async () => {
  const [first, second] = [join(dir, 'first.jsonl'), join(dir, 'second.jsonl')];
  const sessionId = await client.initialize(token);
  assert.match(await announce(sessionId, 'unaudited'), /announced unaudited/);

  assert.equal(gateway.app.applyConfig(configWith({ audit: { sink: 'file', path: first, flushInterval: 0 } })), 'applied');
  await announce(sessionId, 'one');
  const [one] = await records(first, 1);
  assert.equal(one!.tool, 'announce');
  assert.equal(one!.outcome, 'ok');
  assert.equal(one!.arguments, undefined, 'arguments are opt-in');

  assert.equal(gateway.app.applyConfig(configWith({ audit: { sink: 'file', path: second, flushInterval: 0, arguments: { include: true }, claims: ['sub'] } })), 'applied');
  await announce(sessionId, 'two');
  const [two] = await records(second, 1);
  assert.deepEqual(two!.arguments, { text: 'two' });
  assert.deepEqual(two!.claims, { sub: 'audited-user' });
  assert.equal((await records(first, 1)).length, 1, 'the old file gets nothing after the reload');

  // The first rule, on a gateway that started with none and no audit.
  const rules = [{ name: 'no-announce', effect: 'deny' as const, when: 'mcp.tool.name == "announce"' }];
  assert.equal(gateway.app.applyConfig(configWith({ policy: { rules }, audit: { sink: 'file', path: second, flushInterval: 0, arguments: { include: true }, claims: ['sub'] } })), 'applied');
  assert.match(await announce(sessionId, 'three'), /Unknown tool: announce/);
  assert.deepEqual(await sessionToolNames(client, token, sessionId), []);
  const refusal = (await records(second, 2))[1]!;
  assert.equal(refusal.event, 'refusal');
  assert.equal(refusal.rule, 'no-announce');

  // Both off again: the backend answers as at the start.
  assert.equal(gateway.app.applyConfig(configWith({})), 'applied');
  assert.match(await announce(sessionId, 'four'), /announced four/);
  assert.equal((await records(second, 2)).length, 2);
});
