/**
 * A config file written in two steps is not applied half-written (issue 41 §6,
 * docs/operations-reload.md "Editing the file"): an edit in place truncates the file and writes
 * it in two parts, the first cut just before `policy:` — a valid config without the deny rule.
 * The gateway waits until the file has stayed the same for `reload.settle` before reading it,
 * so a call of the denied tool made between the two writes is still refused and the half
 * config is never applied. A ConfigMap's `..data` swap is still applied at once, well within a
 * long window. In-process gateways watching their file as `switchboard --config` does; a real
 * SDK backend (test/fixtures/announcing-backend.ts), a real OAuth server.
 */
import assert from 'node:assert/strict';
import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import type { ConfigInput } from '../../src/config/schema.js';
import { waitUntil } from '../helpers/child.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionClient } from '../helpers/session-client.js';
import { startWatchedGateway, type WatchedGateway } from '../helpers/watched-gateway.js';

let oauth: OAuthHandle;
let alpha: FixtureChild;
const gateways: WatchedGateway[] = [];

before(async () => {
  [oauth, alpha] = await Promise.all([startOAuthServer(), startFixtureChild('announcing-backend.ts')]);
});

after(async () => {
  await Promise.allSettled(gateways.map((g) => g.close()));
  await Promise.allSettled([alpha?.child.stop(), oauth?.stop()]);
});

const NO_ANNOUNCE = { rules: [{ name: 'no-announce', effect: 'deny' as const, when: 'mcp.tool.name == "announce"' }] };

/** The config with `policy` last, as an operator's file ends with it. */
const withPolicy = (base: ConfigInput, settle: string, headers: Record<string, string> = {}): ConfigInput => ({ ...base, reload: { settle }, backends: [{ name: 'alpha', url: alpha.url, headers }], policy: NO_ANNOUNCE });

async function watched(settle: string, mount: 'plain' | 'config-map'): Promise<WatchedGateway> {
  const gateway = await startWatchedGateway(oauth.issuer, (base) => withPolicy(base, settle), mount);
  gateways.push(gateway);
  return gateway;
}

/** Calls `announce` in a session of /mcp/alpha: the text of a result, or the error's code. */
async function callAnnounce(gateway: WatchedGateway, token: string, sessionId: string): Promise<string> {
  const client = sessionClient(() => new URL(`${gateway.url}/mcp/alpha`), 'settle-test');
  const res = await client.post(token, { jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'announce', arguments: { text: 'between-writes' } } }, sessionId);
  const text = await res.text();
  const json = JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6)) as { result?: { content: Array<{ text: string }> }; error?: { code: number } };
  return json.error ? `error ${json.error.code}` : json.result!.content[0]!.text;
}

describe('a config file edited in place in two writes', () => {
  test('the half written first is never applied: the denied tool stays refused between the writes, and the whole file is applied once', async () => {
    const gateway = await watched('1500ms', 'plain');
    const token = await oauth.token({ sub: 'settle-user', aud: gateway.audience });
    const sessionId = await sessionClient(() => new URL(`${gateway.url}/mcp/alpha`), 'settle-test').initialize(token);
    assert.equal(await callAnnounce(gateway, token, sessionId), 'error -32602', 'the rule hides the tool at start');

    // The edit: a new header for alpha, policy unchanged. Cut just before `policy:`.
    const full = stringify(withPolicy(gateway.input, '1500ms', { 'x-edited': '1' }));
    const cut = full.indexOf('\npolicy:') + 1;
    assert.ok(cut > 0 && !full.slice(0, cut).includes('policy'), 'the first part holds no policy');
    const file = await open(gateway.file, 'w');
    try {
      await file.write(full.slice(0, cut));
      // Past the 250 ms after which the watcher used to read the file; well inside the window.
      await sleep(600);
      assert.equal(await callAnnounce(gateway, token, sessionId), 'error -32602', 'between the two writes the deny rule still holds');
      assert.equal(await gateway.reloads('applied'), 0, 'nothing was applied between the writes');
      await file.write(full.slice(cut));
    } finally {
      await file.close();
    }
    await waitUntil(async () => ((await gateway.reloads('applied')) === 1 ? true : undefined), { what: 'the finished file to be applied', timeoutMs: 15_000, intervalMs: 50, details: () => gateway.lines.join('\n') });
    assert.equal(gateway.server.app.mcp.config.backends[0]!.headers['x-edited'], '1');
    assert.equal(await callAnnounce(gateway, token, sessionId), 'error -32602');
    const reloaded = gateway.lines.filter((l) => l.includes('"config reloaded"') || l.includes('loosened'));
    assert.equal(reloaded.length, 1, `one reload, of the whole file, and no loosening: ${reloaded.join('\n')}`);
    assert.equal((await gateway.reloads('invalid')) + (await gateway.reloads('unchanged')), 0);
  });

  test("a ConfigMap's ..data swap is applied at once, not after the window", async () => {
    const gateway = await watched('20s', 'config-map');
    const started = Date.now();
    await gateway.swap(stringify(withPolicy(gateway.input, '20s', { 'x-swapped': '1' })));
    await waitUntil(async () => ((await gateway.reloads('applied')) === 1 ? true : undefined), { what: 'the swapped file to be applied', timeoutMs: 5_000, intervalMs: 50, details: () => gateway.lines.join('\n') });
    assert.ok(Date.now() - started < 5_000, 'well before the 20 s window');
    assert.equal(gateway.server.app.mcp.config.backends[0]!.headers['x-swapped'], '1');
  });
});
