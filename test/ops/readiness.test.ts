/**
 * Readiness and Redis going away (SPEC §2, §5): `/readyz` turns 503 when Redis stops and
 * 200 again when it returns; MCP requests meanwhile wait `redis.unavailableWait` (5 s by
 * default; issue 45 §1) for it, then get a clear 503 with a JSON-RPC error and
 * `Retry-After` instead of hanging, and the same session works again afterwards;
 * `/healthz` stays 200 throughout. Closing the app (shutdown) turns readiness to 503 first.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SESSION_CACHE_MAX_AGE_MS } from '../../src/sessions/session-service.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let everything: EverythingHandle;
let oauth: OAuthHandle;
let redis: RedisHandle;
let gateway: GatewayHandle;

before(async () => {
  [everything, oauth, redis] = await Promise.all([startEverything(), startOAuthServer(), startRedis()]);
  gateway = await startGateway({ issuer: oauth.issuer, redisUrl: redis.url, backends: [{ name: 'everything', url: everything.url }] });
});

after(async () => {
  await gateway?.close().catch(() => {});
  await Promise.allSettled([everything?.stop(), oauth?.stop(), redis?.stop()]);
});

async function status(path: string): Promise<number> {
  return (await fetch(`${gateway.url}${path}`, { signal: AbortSignal.timeout(5_000) })).status;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('Redis outage: readyz 503 at once, MCP 503 with Retry-After after redis.unavailableWait, then both recover by themselves', async () => {
  const token = await oauth.token({ sub: 'ready-user', aud: gateway.audience });
  const client = new Client({ name: 'ready-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(gateway.endpoint('everything'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  assert.equal(await status('/readyz'), 200);

  await redis.pause();
  await waitFor('readyz to report 503', async () => (await status('/readyz')) === 503);
  assert.equal(await status('/healthz'), 200, 'liveness is not readiness');
  // A session read in the last few seconds is served from the replica's cache even now;
  // wait until the cache must ask Redis again.
  await new Promise((resolve) => setTimeout(resolve, SESSION_CACHE_MAX_AGE_MS + 500));

  const started = Date.now();
  const res = await fetch(gateway.endpoint('everything'), {
    method: 'POST',
    signal: AbortSignal.timeout(10_000),
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': transport.sessionId!,
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list' }),
  });
  assert.equal(res.status, 503);
  const waited = Date.now() - started;
  assert.ok(waited >= 4_900 && waited < 9_000, `waited redis.unavailableWait (5 s) for Redis, then failed instead of hanging (${waited} ms)`);
  assert.equal(res.headers.get('retry-after'), '2');
  const body = (await res.json()) as { error: { code: number; message: string } };
  assert.equal(body.error.code, -32013);

  await redis.resume();
  await waitFor('readyz to report 200 again', async () => (await status('/readyz')) === 200);
  // The test Redis runs without persistence, so the restarted server is empty: the old
  // session is reported as not found (the client must start over), never served half-way,
  // and a new session works at once.
  await assert.rejects(client.listTools(), /404|Session not found/);
  const fresh = new Client({ name: 'ready-test', version: '1.0.0' });
  await fresh.connect(new StreamableHTTPClientTransport(gateway.endpoint('everything'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  assert.ok((await fresh.listTools()).tools.length > 0);
  await fresh.close();
  await client.close();
});

test('shutdown: open SSE streams get retry and end, readiness turns 503, close completes', async () => {
  const token = await oauth.token({ sub: 'drain-user', aud: gateway.audience });
  // Raw initialize: the SDK client would open the session's one GET stream itself.
  const init = await fetch(gateway.endpoint('everything'), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'drain-test', version: '1' } } }),
  });
  assert.equal(init.status, 200);
  await init.body?.cancel();
  const sessionId = init.headers.get('mcp-session-id')!;
  const headers = { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
  const stream = await fetch(gateway.endpoint('everything'), { headers, signal: AbortSignal.timeout(15_000) });
  assert.equal(stream.status, 200);
  const body = stream.text();
  // Let the stream settle (priming event written) before closing.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const closed = gateway.app.close();
  const text = await body;
  await closed;
  assert.equal(gateway.app.readiness.draining, true);
  assert.match(text, /^retry: \d+$/m, 'the stream told the client when to reconnect');
});
