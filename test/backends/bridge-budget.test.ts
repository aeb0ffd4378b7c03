/**
 * One user must not take every stdio child (issue 13 §2): through the real gateway, with the
 * SDK stdio server of test/fixtures/stdio-backend.ts behind the local bridge, a user gets at
 * most `bridge.maxSessionsPerUser` sessions of a backend while another user still gets one;
 * `bridge.maxSessions` bounds them all; the config keys are validated by name.
 * (Idle children: bridge-stdio.test.ts, `bridge.idleTimeout`.)
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { nodeEntry } from '../helpers/node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/stdio-backend.ts', import.meta.url));
const VERSION = '2025-11-25';

let oauth: OAuthHandle;
let gateway: GatewayHandle;

before(async () => {
  oauth = await startOAuthServer();
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: 'local', transport: 'stdio', command: process.execPath, args: nodeEntry(FIXTURE), timeout: '15s' }],
    overrides: { bridge: { maxSessions: 3, maxSessionsPerUser: 2 }, limits: { rateLimit: { enabled: false } } },
  });
});

after(async () => {
  await gateway?.close();
  await oauth?.stop();
});

function post(token: string, body: unknown, sessionId?: string): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (sessionId) Object.assign(headers, { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION });
  return fetch(gateway.endpoint('local'), { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
}

/** Initializes a session: its id, or the JSON-RPC error the gateway answered with. */
async function initialize(token: string): Promise<{ sessionId?: string; status: number; error?: { code: number; message: string } }> {
  const res = await post(token, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'bridge-budget', version: '1' } } });
  const body = (await res.json()) as { result?: unknown; error?: { code: number; message: string } };
  return { sessionId: res.headers.get('mcp-session-id') ?? undefined, status: res.status, error: body.error };
}

async function end(token: string, sessionId: string): Promise<void> {
  const res = await fetch(gateway.endpoint('local'), { method: 'DELETE', headers: { authorization: `Bearer ${token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION }, signal: AbortSignal.timeout(15_000) });
  assert.equal(res.status, 204);
}

describe('bridge sessions per user', () => {
  test("a user's share is bridge.maxSessionsPerUser; the next user still gets a session; bridge.maxSessions caps all", { timeout: 120_000 }, async () => {
    const [alice, bob, carol] = await Promise.all(['alice', 'bob', 'carol'].map((sub) => oauth.token({ sub: `${sub}-bridge`, aud: gateway.audience })));
    const first = await initialize(alice!);
    const second = await initialize(alice!);
    assert.ok(first.sessionId && second.sessionId, JSON.stringify([first, second]));

    const third = await initialize(alice!);
    assert.equal(third.sessionId, undefined, 'no third session for alice');
    assert.equal(third.error?.code, -32010);
    assert.match(third.error!.message, /too many open sessions/);

    const bobs = await initialize(bob!);
    assert.ok(bobs.sessionId, `bob is not starved by alice: ${JSON.stringify(bobs)}`);

    const carols = await initialize(carol!);
    assert.equal(carols.error?.code, -32010, 'three sessions in all: the backend is full');

    await end(alice!, first.sessionId!);
    const again = await initialize(carol!);
    assert.ok(again.sessionId, `a freed slot is usable again: ${JSON.stringify(again)}`);
    for (const [token, id] of [[alice, second.sessionId], [bob, bobs.sessionId], [carol, again.sessionId]] as const) await end(token!, id!);
  });

  test("through /mcp the same share applies: a user's third aggregated session goes without the stdio backend, another user's has it", { timeout: 120_000 }, async () => {
    const [dave, erin] = await Promise.all(['dave', 'erin'].map((sub) => oauth.token({ sub: `${sub}-bridge`, aud: gateway.audience })));
    const aggregated = async (token: string): Promise<{ sessionId: string; tools: string[] }> => {
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const init = await fetch(new URL('/mcp', gateway.url), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'bridge-budget', version: '1' } } }), signal: AbortSignal.timeout(30_000) });
      assert.equal(init.status, 200);
      await init.text();
      const sessionId = init.headers.get('mcp-session-id')!;
      const listed = await fetch(new URL('/mcp', gateway.url), { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }), signal: AbortSignal.timeout(30_000) });
      const body = (await listed.json()) as { result: { tools: Array<{ name: string }> } };
      return { sessionId, tools: body.result.tools.map((t) => t.name) };
    };
    const endAggregated = (token: string, sessionId: string) => fetch(new URL('/mcp', gateway.url), { method: 'DELETE', headers: { authorization: `Bearer ${token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION } }).then((r) => r.text());
    const sessions = [await aggregated(dave!), await aggregated(dave!)];
    for (const s of sessions) assert.ok(s.tools.includes('local__echo'), JSON.stringify(s.tools));
    const third = await aggregated(dave!);
    assert.ok(!third.tools.includes('local__echo'), "dave's third /mcp session has no stdio child of its own");
    const erins = await aggregated(erin!);
    assert.ok(erins.tools.includes('local__echo'), 'erin is not starved by dave');
    for (const s of [...sessions, third]) await endAggregated(dave!, s.sessionId);
    await endAggregated(erin!, erins.sessionId);
  });

  test('config: bridge.* keys and their defaults', () => {
    const base = { publicUrl: 'http://127.0.0.1:1', auth: { issuer: 'http://127.0.0.1:9', audience: 'a' }, backends: [{ name: 'demo', url: 'http://127.0.0.1:9/mcp' }] };
    assert.deepEqual(parseConfig(base).bridge, { maxSessions: 100, maxSessionsPerUser: 10, idleTimeout: 600_000 });
    assert.deepEqual(parseConfig({ ...base, bridge: { maxSessions: '50', maxSessionsPerUser: 5, idleTimeout: '2m' } }).bridge, { maxSessions: 50, maxSessionsPerUser: 5, idleTimeout: 120_000 });
    assert.throws(() => parseConfig({ ...base, bridge: { maxSessions: 5, maxSessionsPerUser: 6 } }), /bridge\.maxSessionsPerUser: must be at most bridge\.maxSessions \(5\)/);
    assert.throws(() => parseConfig({ ...base, bridge: { maxSessionsPerUser: 0 } }), /bridge\.maxSessionsPerUser: must be at least 1/);
    assert.throws(() => parseConfig({ ...base, bridge: { idleTimeout: '100ms' } }), /bridge\.idleTimeout: must be at least 1s/);
    assert.throws(() => parseConfig({ ...base, bridge: { idleTimeout: 'soon' } }), /bridge\.idleTimeout/);
  });
});
