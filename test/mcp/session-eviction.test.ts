/**
 * Which session `sessions.maxPerUser` ends (issue 28 §7; SPEC §8 "Budgets"), through the real
 * gateway over HTTP on a real Redis, with a real SDK backend (test/fixtures/paging-backend.ts)
 * and the default cap (100).
 *
 * Clients leave sessions behind without a DELETE (mcp-remote's probe, one per Inspector CLI
 * command). A user who does that 150 times must keep the sessions they are using: one with
 * its GET stream open, one with a call in flight. The abandoned ones go, least recently used
 * first. (Use by quick calls is recorded when a replica reads the session from the store, at
 * most every 5 s per replica — the session cache — so a burst of 100 sessions within those
 * seconds outruns it; the store contract tests that order: test/state/store-contract.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { startPagingBackend, type PagingBackend } from '../fixtures/paging-backend.js';
import { waitUntil } from '../helpers/child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { SseReader } from '../helpers/sse-client.js';

const VERSION = '2025-11-25';
const ABANDONED = 150;

let oauth: OAuthHandle;
let redis: RedisHandle;
let backend: PagingBackend;
let gateway: GatewayHandle;
let client: Redis;

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startPagingBackend({ tools: 2, resources: 1, pageSize: 10 })]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    redisUrl: redis.url,
    backends: [{ name: 'paging', url: backend.url }],
    // sessions.maxPerUser stays at its default; the rate limit would slow 150 initializes down.
    overrides: { limits: { rateLimit: { enabled: false } } },
  });
  client = new Redis(redis.url);
});

after(async () => {
  client?.disconnect();
  backend?.releaseHeld();
  await gateway?.close();
  await Promise.all([backend?.stop(), redis?.stop(), oauth?.stop()]);
});

function post(token: string, body: unknown, sessionId?: string, signal = AbortSignal.timeout(20_000)): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (sessionId) Object.assign(headers, { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION });
  return fetch(gateway.endpoint('paging'), { method: 'POST', headers, body: JSON.stringify(body), signal });
}

/** What a client that connects and leaves without a DELETE does: initialize, then initialized. */
async function initialize(token: string): Promise<string> {
  const res = await post(token, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'eviction-test', version: '1' } } });
  assert.equal(res.status, 200, await res.clone().text());
  await res.text();
  const sessionId = res.headers.get('mcp-session-id')!;
  const initialized = await post(token, { jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId);
  assert.equal(initialized.status, 202);
  await initialized.text();
  return sessionId;
}

async function pingStatus(token: string, sessionId: string): Promise<number> {
  const res = await post(token, { jsonrpc: '2.0', id: 'p', method: 'ping' }, sessionId);
  await res.text();
  return res.status;
}

/** Whether the store holds an in-use mark for this session (the replica's renewal wrote it). */
async function markedInUse(sessionId: string): Promise<boolean> {
  const [, keys] = await client.scan('0', 'MATCH', `${gateway.config.redis!.keyPrefix}su:*`, 'COUNT', 1000);
  for (const key of keys) if ((await client.zscore(key, sessionId)) !== null) return true;
  return false;
}

/** Leaves ABANDONED sessions behind; returns them in creation order. */
async function abandonSessions(token: string): Promise<string[]> {
  const abandoned: string[] = [];
  for (let n = 0; n < ABANDONED; n++) abandoned.push(await initialize(token));
  return abandoned;
}

/** The `evicted` least recently used abandoned sessions are gone (404), the rest answer. */
async function assertLeastRecentlyUsedWent(token: string, abandoned: string[], evicted: number): Promise<void> {
  for (const [n, id] of abandoned.entries()) {
    assert.equal(await pingStatus(token, id), n < evicted ? 404 : 200, `abandoned session ${n}: the ${evicted} least recently used go`);
  }
}

describe('sessions.maxPerUser (default 100) ends abandoned sessions, not the ones in use', () => {
  test(`a session with its GET stream open survives ${ABANDONED} abandoned sessions of the same user`, { timeout: 120_000 }, async () => {
    const eve = await oauth.token({ sub: `eve-${Date.now()}`, aud: gateway.audience });
    assert.equal(gateway.config.sessions.maxPerUser, 100, 'the default cap');
    const streaming = await initialize(eve);
    const get = await fetch(gateway.endpoint('paging'), {
      headers: { authorization: `Bearer ${eve}`, accept: 'text/event-stream', 'mcp-session-id': streaming, 'mcp-protocol-version': VERSION },
      signal: AbortSignal.timeout(110_000),
    });
    assert.equal(get.status, 200);
    const stream = new SseReader(get);

    const abandoned = await abandonSessions(eve);

    assert.equal(await pingStatus(eve, streaming), 200, 'the session with an open stream is kept');
    await assertLeastRecentlyUsedWent(eve, abandoned, 1 + ABANDONED - 100);
    await stream.cancel();
  });

  test(`a session with a call in flight survives ${ABANDONED} abandoned sessions of the same user, and the call gets its answer`, { timeout: 120_000 }, async () => {
    const fay = await oauth.token({ sub: `fay-${Date.now()}`, aud: gateway.audience });
    const calling = await initialize(fay);
    const call = post(fay, { jsonrpc: '2.0', id: 'held', method: 'tools/call', params: { name: 'hold', arguments: {} } }, calling, AbortSignal.timeout(110_000));
    await waitUntil(async () => (backend.held() === 1 ? true : undefined), { what: 'the held call to reach the backend', timeoutMs: 10_000, intervalMs: 25 });
    // A call is marked in use once a renewal (every ~3 s) finds it still in flight.
    await waitUntil(async () => ((await markedInUse(calling)) ? true : undefined), { what: 'the call in flight to be marked in use', timeoutMs: 15_000, intervalMs: 100 });

    const abandoned = await abandonSessions(fay);

    assert.equal(await pingStatus(fay, calling), 200, 'the session with a call in flight is kept');
    await assertLeastRecentlyUsedWent(fay, abandoned, 1 + ABANDONED - 100);
    backend.releaseHeld();
    const answer = await call;
    assert.equal(answer.status, 200);
    assert.match(await answer.text(), /released/, 'the call in flight got its answer');
  });
});
