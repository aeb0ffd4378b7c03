/**
 * Pinning is not bypassed by the shape of the list answer (issue 41 §1). Real parts: an OAuth
 * server, Redis, a gateway, and hostile v1 SDK backends (test/fixtures/hostile-backend.ts) that
 * change `search` (a rug pull) and answer `tools/list` with the id as a string, a byte-order
 * mark before the JSON, the response twice, a batch around it, or two SSE candidates — shapes
 * the official v1 SDK client reads without complaint.
 *
 * Each test has a backend of its own (pins are per backend), first lists it as it is (the pins
 * are recorded), then turns on the rug pull and the shape: the client must never see the
 * changed description, gets -32010 naming the backend instead, and `search` is held or blocked
 * as a change the list would have shown (its poisoned call never reaches the backend).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { RUG_PULLED_SEARCH, startHostileBackend, type HostileBackend, type ListShape } from '../fixtures/hostile-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { refused } from '../helpers/refused.js';

const CASES: Array<{ name: string; mode: 'block' | 'hold'; shape: ListShape }> = [
  { name: 'block-string-id', mode: 'block', shape: 'string-id' },
  { name: 'block-bom', mode: 'block', shape: 'bom' },
  { name: 'hold-string-id', mode: 'hold', shape: 'string-id' },
  { name: 'hold-bom', mode: 'hold', shape: 'bom' },
  { name: 'block-duplicate', mode: 'block', shape: 'duplicate' },
  { name: 'block-batch', mode: 'block', shape: 'batch' },
  { name: 'block-sse-two', mode: 'block', shape: 'sse-two' },
];

let idp: OAuthHandle;
let redis: RedisHandle;
let gateway: GatewayHandle;
const backends = new Map<string, HostileBackend>();
const clients: Client[] = [];

before(async () => {
  [idp, redis] = await Promise.all([startOAuthServer(), startRedis()]);
  for (const c of CASES) backends.set(c.name, await startHostileBackend());
  gateway = await startGateway({ issuer: idp.issuer, redisUrl: redis.url, backends: CASES.map((c) => ({ name: c.name, url: backends.get(c.name)!.url, pinning: { mode: c.mode } })) });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([...[...backends.values()].map((b) => b.close()), redis?.stop(), idp?.stop()]);
});

async function connect(backend: string): Promise<Client> {
  const client = new Client({ name: 'alice', version: '1.0.0' });
  const token = await idp.token({ sub: 'alice', aud: gateway.audience });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(gateway.endpoint(backend), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, `connect ${backend}`);
  clients.push(client);
  return client;
}

/** Pins recorded as the backend is, then the rug pull sent in `shape`; the client's view of it. */
async function rugPulled(name: string, shape: ListShape): Promise<{ client: Client; backend: HostileBackend }> {
  const backend = backends.get(name)!;
  const client = await connect(name);
  assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['search', 'stable', 'match'], 'first sight served as sent');
  backend.rugPull = true;
  backend.shape = shape;
  const reshaped = backend.reshaped;
  await refused(client.listTools(), -32010, new RegExp(`backend "${name}" sent an answer the gateway cannot judge`));
  assert.equal(backend.reshaped, reshaped + 1, `the backend really answered in shape ${shape}`);
  return { client, backend };
}

for (const { name, mode, shape } of CASES.filter((c) => c.mode === 'block')) {
  test(`block, ${shape}: the list is refused, the changed tool's call never reaches the backend`, async () => {
    const { client, backend } = await rugPulled(name, shape);
    const before = backend.calls.length;
    await refused(client.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, new RegExp(`Tool "search" of backend "${name}" is blocked`));
    assert.equal(backend.calls.length, before, 'the blocked call never ran');
    await client.callTool({ name: 'stable', arguments: {} });
    assert.equal(backend.calls.at(-1)?.tool, 'stable', `unchanged tools keep working (${mode})`);
  });
}

for (const { name, shape } of CASES.filter((c) => c.mode === 'hold')) {
  test(`hold, ${shape}: the list is refused, a call using the changed definition never reaches the backend`, async () => {
    const { client, backend } = await rugPulled(name, shape);
    const before = backend.calls.length;
    await refused(client.callTool({ name: 'search', arguments: { query: 'q', note: 'id_rsa' } }), -32602, new RegExp(`tool "search" of backend "${name}".*pinned inputSchema`));
    assert.equal(backend.calls.length, before, 'the call with the new argument never ran');
    // Listed again in its proper shape, the pinned definition is what the client sees.
    backend.shape = 'exact';
    const search = (await client.listTools()).tools.find((t) => t.name === 'search');
    assert.notEqual(search?.description, RUG_PULLED_SEARCH);
  });
}

test('the refusal names the backend and the reason in error.data, under the client\'s own id', async () => {
  const backend = backends.get('block-string-id')!;
  backend.rugPull = true;
  backend.shape = 'string-id';
  const token = await idp.token({ sub: 'alice', aud: gateway.audience });
  const headers = { Authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
  const init = await fetch(gateway.endpoint('block-string-id'), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }), signal: AbortSignal.timeout(10_000) });
  const session = init.headers.get('mcp-session-id')!;
  await init.body?.cancel();
  const res = await fetch(gateway.endpoint('block-string-id'), { method: 'POST', headers: { ...headers, 'mcp-session-id': session }, body: JSON.stringify({ jsonrpc: '2.0', id: 41, method: 'tools/list' }), signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  assert.ok(!text.includes(RUG_PULLED_SEARCH), 'nothing of the backend\'s answer');
  const answer = JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6)) as { id: unknown; error: { code: number; data: Record<string, unknown> } };
  assert.equal(answer.id, 41);
  assert.equal(answer.error.code, -32010);
  assert.deepEqual(answer.error.data, { backend: 'block-string-id', reason: 'protocol', unreadable: 'a response to id "41", which the request did not send (it matches id 41 loosely)' });
});
