/**
 * Per-user rate limit on the MCP endpoints (`limits.rateLimit`), end to end with real parts:
 * a real Redis, a real OAuth server issuing real JWTs, server-everything as the backend and
 * the gateway in-process. Shows: 429 with Retry-After, x-ratelimit-* headers (on JSON and SSE answers too) and
 * a JSON-RPC error (id null: refused before the body is read); requests counted when their
 * headers arrive, so bodies that never finish count too (issue 13); per-user keys; one budget shared by two
 * gateways on the same Redis (each sees the other's requests once they have been flushed,
 * within about one flush interval); the in-memory store limiting too; the window resetting;
 * health, metrics and OpenAPI routes never limited; and, when Redis is gone or stalls, the
 * limiter still answering at once from the replica's own counts (metric counted).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { WebSocket } from 'ws';
import { userKeyOf } from '../../src/auth/principal.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { waitUntil } from '../helpers/child.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { mcpPostHead, rawConnect, type RawConnection } from '../helpers/raw-http.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const BACKEND = 'everything';
const REQUEST_MS = 10_000;
const RATE_LIMITED = -32029;

let oauth: OAuthHandle;
let everything: EverythingHandle;
let redis: RedisHandle;
const gateways: GatewayHandle[] = [];

before(async () => {
  [oauth, everything, redis] = await Promise.all([startOAuthServer(), startEverything(), startRedis()]);
});

after(async () => {
  await Promise.allSettled(gateways.map((g) => g.close()));
  await Promise.allSettled([oauth?.stop(), everything?.stop(), redis?.stop()]);
});

async function gateway(rateLimit: NonNullable<ConfigInput['limits']>['rateLimit'], redisConfig?: { url: string; keyPrefix: string; unavailableWait?: string }): Promise<GatewayHandle> {
  const g = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: BACKEND, url: everything.url, timeout: '30s' }],
    overrides: { limits: { rateLimit }, ...(redisConfig ? { redis: redisConfig } : {}) },
  });
  gateways.push(g);
  return g;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** One MCP POST; `session` undefined sends `initialize`. */
async function post(g: GatewayHandle, token: string, id: number, session?: string, request?: { method: string; params?: unknown }): Promise<Answer & { session?: string }> {
  const body = session
    ? { jsonrpc: '2.0', id, ...(request ?? { method: 'ping' }) }
    : { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rate-limit-test', version: '1' } } };
  const res = await fetch(g.endpoint(BACKEND), {
    method: 'POST',
    signal: AbortSignal.timeout(REQUEST_MS),
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text(), session: res.headers.get('mcp-session-id') ?? session };
}

/** A 429 refusal. Its JSON-RPC id is null: requests are counted and refused before their body (and id) is read. */
function assertLimited(answer: Answer, max: number, window: number): void {
  assert.equal(answer.status, 429, answer.text);
  const retryAfter = Number(answer.headers.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= window, `Retry-After ${answer.headers.get('retry-after')} within the window`);
  assert.equal(answer.headers.get('x-ratelimit-limit'), String(max));
  assert.equal(answer.headers.get('x-ratelimit-remaining'), '0');
  assert.ok(answer.headers.get('x-ratelimit-reset'));
  assert.match(answer.headers.get('content-type') ?? '', /^application\/json/);
  const body = JSON.parse(answer.text) as { jsonrpc: string; id: unknown; error: { code: number; message: string; data: { retryAfter: number } } };
  assert.equal(body.jsonrpc, '2.0');
  assert.equal(body.id, null);
  assert.equal(body.error.code, RATE_LIMITED);
  assert.equal(body.error.data.retryAfter, retryAfter);
}

/** Opens a WebSocket (subprotocol mcp) and returns the HTTP answer that refused the upgrade. */
function wsHandshake(url: string, token: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, 'mcp', { headers: { authorization: `Bearer ${token}` }, handshakeTimeout: REQUEST_MS });
    socket.on('open', () => {
      socket.close();
      reject(new Error(`${url}: the upgrade was accepted`));
    });
    socket.on('error', reject);
    socket.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') headers.set(name, value);
        resolve({ status: res.statusCode ?? 0, headers, text: Buffer.concat(chunks).toString('utf8') });
        socket.terminate();
      });
    });
  });
}

async function metricsText(g: GatewayHandle): Promise<string> {
  return (await fetch(`${g.url}/metrics`, { signal: AbortSignal.timeout(REQUEST_MS) })).text();
}

function sample(text: string, line: RegExp): number {
  const match = line.exec(text);
  return match ? Number(match[1]) : 0;
}

/**
 * Waits (bounded) until the Redis counter `key` reads `expected`, i.e. the gateways have
 * flushed their counts (every flush interval, 100 ms), then a moment for the gateways to
 * take the answer of that flush in.
 */
async function flushedTo(inspect: Redis, key: string, expected: string): Promise<void> {
  await waitUntil(async () => ((await inspect.get(key)) === expected ? true : undefined), {
    what: `Redis counter ${key} = ${expected}`,
    timeoutMs: 3_000,
    intervalMs: 10,
  });
  await new Promise((resolve) => setTimeout(resolve, 50));
}

async function waitForSample(g: GatewayHandle, line: RegExp, atLeast: number): Promise<void> {
  await waitUntil(async () => (sample(await metricsText(g), line) >= atLeast ? true : undefined), { what: `${line.source} ≥ ${atLeast}`, timeoutMs: 5_000, intervalMs: 50 });
}

describe('Redis store', () => {
  test('over the limit → 429 with Retry-After and a JSON-RPC error; another user is not limited; two gateways share one budget in Redis', async () => {
    const keyPrefix = 'rlshared:';
    const a = await gateway({ max: 4, window: '1m' }, { url: redis.url, keyPrefix });
    const b = await gateway({ max: 4, window: '1m' }, { url: redis.url, keyPrefix });
    const [aliceA, aliceB, bobB] = await Promise.all([
      oauth.token({ sub: 'alice', aud: a.audience }),
      oauth.token({ sub: 'alice', aud: b.audience }),
      oauth.token({ sub: 'bob', aud: b.audience }),
    ]);

    const inspect = new Redis(redis.url);
    const aliceKey = `${keyPrefix}rl:${userKeyOf(oauth.issuer, 'alice')}`;
    try {
      // Alice: 2 requests on gateway a, then 2 on gateway b use up the 4 of her window. Each
      // gateway decides from its own counts at once and syncs them with Redis in the
      // background (one script call per flush interval), reading the shared count back.
      const init = await post(a, aliceA, 1);
      assert.equal(init.status, 200, init.text);
      assert.equal(init.headers.get('x-ratelimit-remaining'), '3', 'allowed answers report what is left');
      // A call with progress: server-everything answers it as an SSE stream (progress, then the
      // result), which the gateway relays as a stream (a one-event answer would come as JSON).
      const ping = await post(a, aliceA, 2, init.session, { method: 'tools/call', params: { name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 2 }, _meta: { progressToken: 'p' } } });
      assert.equal(ping.status, 200, ping.text);
      assert.match(ping.headers.get('content-type') ?? '', /^text\/event-stream/, 'a call with progress is answered as SSE');
      assert.equal(ping.headers.get('x-ratelimit-remaining'), '2', 'SSE answers carry the rate-limit headers too');
      assert.equal(ping.headers.get('x-ratelimit-limit'), '4');
      await flushedTo(inspect, aliceKey, '2');
      // b has not seen Alice yet: its first request for her is decided on its own count.
      assert.equal((await post(b, aliceB, 3, init.session)).status, 200);
      assert.equal((await post(b, aliceB, 4, init.session)).status, 200);
      await flushedTo(inspect, aliceKey, '4');
      // b's flush read a's 2 back: the fifth is refused.
      assertLimited(await post(b, aliceB, 5, init.session), 4, 60);
      // a last read 2 (before b's requests): it lets one more through, the documented lag
      // (at most what reaches a replica within one flush interval after its last read)...
      assert.equal((await post(a, aliceA, 6, init.session)).status, 200);
      // ...and once that request's flush has read the shared count back, a refuses too.
      await flushedTo(inspect, aliceKey, '6');
      assertLimited(await post(a, aliceA, 7, init.session), 4, 60);
      assertLimited(await post(b, aliceB, 8, init.session), 4, 60);

      // Bob, in the same window, on the same gateway: not limited.
      const bobInit = await post(b, bobB, 1);
      assert.equal(bobInit.status, 200, bobInit.text);
      assert.equal((await post(b, bobB, 2, bobInit.session)).status, 200);

      // The counter is one Redis key per user under the configured prefix, with a TTL; every
      // request counted (refused ones too, as with the plugin's own stores), once flushed.
      await flushedTo(inspect, aliceKey, '8');
      const ttl = await inspect.pttl(aliceKey);
      assert.ok(ttl > 0 && ttl <= 60_000, `TTL ${ttl}`);
      await flushedTo(inspect, `${keyPrefix}rl:${userKeyOf(oauth.issuer, 'bob')}`, '2');
    } finally {
      inspect.disconnect();
    }

    // 429s are counted by route template, never by user.
    const text = await metricsText(a);
    assert.equal(sample(text, /^switchboard_rate_limited_total\{route="\/mcp\/:backend"\} (\d+)$/m), 1);
    assert.ok(!text.includes(userKeyOf(oauth.issuer, 'alice')));
  });

  test('the window resets', async () => {
    const g = await gateway({ max: 2, window: '2s' }, { url: redis.url, keyPrefix: 'rlwindow:' });
    await expectWindowReset(g, 'carol');
  });

  test('one budget over /mcp/{backend}, /mcp and the /ws/mcp… upgrades; health, readiness, metrics and OpenAPI are never limited; no token → 401, not 429', async () => {
    const g = await gateway({ max: 1, window: '1m' }, { url: redis.url, keyPrefix: 'rlops:' });
    const token = await oauth.token({ sub: 'dave', aud: g.audience });
    for (let i = 0; i < 5; i++) {
      for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.yaml', '/.well-known/oauth-protected-resource/mcp']) {
        const res = await fetch(`${g.url}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(REQUEST_MS) });
        await res.arrayBuffer();
        assert.notEqual(res.status, 429, path);
        assert.equal(res.headers.get('x-ratelimit-limit'), null, `${path} carries no rate-limit headers`);
      }
    }
    for (let i = 0; i < 3; i++) {
      const res = await fetch(g.endpoint(BACKEND), { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
      await res.arrayBuffer();
      assert.equal(res.status, 401);
    }
    // Dave's one request of the window is still his...
    assert.equal((await post(g, token, 1)).status, 200);
    assertLimited(await post(g, token, 2), 1, 60);
    // ...and the same counter covers the aggregated endpoint and the WebSocket handshakes.
    const aggregated = await fetch(`${g.url}/mcp`, {
      method: 'POST',
      signal: AbortSignal.timeout(REQUEST_MS),
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'agg-1', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rate-limit-test', version: '1' } } }),
    });
    assertLimited({ status: aggregated.status, headers: aggregated.headers, text: await aggregated.text() }, 1, 60);
    for (const path of ['/ws/mcp', `/ws/mcp/${BACKEND}`]) {
      const handshake = await wsHandshake(`${g.url.replace('http', 'ws')}${path}`, token);
      assertLimited(handshake, 1, 60);
    }
    const text = await metricsText(g);
    assert.equal(sample(text, /^switchboard_rate_limited_total\{route="\/mcp"\} (\d+)$/m), 1);
    assert.equal(sample(text, /^switchboard_rate_limited_total\{route="\/ws\/mcp\/:backend"\} (\d+)$/m), 1);
  });
});

/** An authenticated MCP POST announcing 200 bytes of body and sending a few; its answer is never read. */
async function stalledPost(g: GatewayHandle, token: string): Promise<RawConnection> {
  const c = await rawConnect(g.url);
  c.socket.write(`${mcpPostHead(g.url, `/mcp/${BACKEND}`, token, 200)}{"jsonrpc":"2.0",`);
  return c;
}

describe('Redis store, bodies that never finish', () => {
  test('are counted when their headers arrive: with max stalled POSTs open, the next request is 429', async () => {
    const keyPrefix = 'rlstalled:';
    const g = await gateway({ max: 3, window: '1m' }, { url: redis.url, keyPrefix });
    const token = await oauth.token({ sub: 'judy', aud: g.audience });
    const inspect = new Redis(redis.url);
    const stalled = await Promise.all([1, 2, 3].map(() => stalledPost(g, token)));
    try {
      // Counted (and synced to Redis) although no body has arrived.
      await flushedTo(inspect, `${keyPrefix}rl:${userKeyOf(oauth.issuer, 'judy')}`, '3');
      assertLimited(await post(g, token, 4), 3, 60);
      for (const s of stalled) {
        assert.equal(s.closed(), false, 'the stalled requests are still open');
        assert.equal(s.answer(), '', 'and unanswered');
      }
    } finally {
      inspect.disconnect();
      for (const s of stalled) s.socket.destroy();
    }
  });
});

describe('in-memory store', () => {
  test('limits per user too, and the window resets', async () => {
    const g = await gateway({ max: 2, window: '2s' });
    const other = await oauth.token({ sub: 'frank', aud: g.audience });
    await expectWindowReset(g, 'erin', async () => {
      // While Erin is limited, Frank is not.
      assert.equal((await post(g, other, 1)).status, 200);
    });
  });

  test('a MCP 2026-07-28 request over the limit gets -32016, outside the range that revision reserves', async () => {
    const g = await gateway({ max: 1, window: '60s' });
    const token = await oauth.token({ sub: 'heidi', aud: g.audience });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } });
    await (await fetch(g.endpoint(BACKEND), { method: 'POST', headers, body })).arrayBuffer();
    const refused = await fetch(g.endpoint(BACKEND), { method: 'POST', headers, body });
    assert.equal(refused.status, 429);
    assert.equal(((await refused.json()) as { error: { code: number } }).error.code, -32016);
  });

  test('enabled: false turns it off', async () => {
    const g = await gateway({ enabled: false, max: 1 });
    const token = await oauth.token({ sub: 'grace', aud: g.audience });
    const init = await post(g, token, 1);
    for (let id = 2; id < 5; id++) assert.equal((await post(g, token, id, init.session)).status, 200);
    assert.equal(init.headers.get('x-ratelimit-limit'), null);
  });
});

/** max 2 in a 2 s window: the third request is refused, and served again once Retry-After has passed. */
async function expectWindowReset(g: GatewayHandle, sub: string, whileLimited?: () => Promise<void>): Promise<void> {
  const token = await oauth.token({ sub, aud: g.audience });
  const init = await post(g, token, 1);
  assert.equal(init.status, 200, init.text);
  assert.equal((await post(g, token, 2, init.session)).status, 200);
  const limited = await post(g, token, 3, init.session);
  assertLimited(limited, 2, 2);
  await whileLimited?.();
  const waitMs = Number(limited.headers.get('retry-after')) * 1000 + 100;
  assert.ok(waitMs <= 2_100, 'bounded wait');
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  // A fresh window: two more requests, then refused again.
  const again = await post(g, token, 4, init.session);
  assert.equal(again.status, 200, again.text);
  assert.equal((await post(g, token, 5, init.session)).status, 200);
  assertLimited(await post(g, token, 6, init.session), 2, 2);
}

describe('Redis failing', () => {
  let outage: RedisHandle;
  before(async () => {
    outage = await startRedis();
  });
  after(async () => {
    await outage?.stop();
  });

  test("Redis stalled or stopped → requests are still answered at once from the replica's own counts (fail open only for the shared count), and the failures are counted", async () => {
    // The store waits 1 s for Redis before its 503 (redis.unavailableWait); the limiter never waits.
    const g = await gateway({ max: 2, window: '1m' }, { url: outage.url, keyPrefix: 'rlfail:', unavailableWait: '1s' });
    const [token, newcomer] = await Promise.all([oauth.token({ sub: 'heidi', aud: g.audience }), oauth.token({ sub: 'ivan', aud: g.audience })]);
    const init = await post(g, token, 1);
    assert.equal(init.status, 200, init.text);
    assert.equal((await post(g, token, 2, init.session)).status, 200);
    assertLimited(await post(g, token, 3, init.session), 2, 60);

    // A Redis that stalls (CLIENT PAUSE): the limiter never waits for it; Heidi is still over
    // her limit by this replica's own count. The stalled sync is reported as a timeout.
    const admin = new Redis(outage.url);
    try {
      await admin.client('PAUSE', 1500, 'ALL');
    } finally {
      admin.disconnect();
    }
    const started = Date.now();
    assertLimited(await post(g, token, 4, init.session), 2, 60);
    assert.ok(Date.now() - started < 1_000, 'answered without waiting for Redis');
    await waitForSample(g, /^switchboard_rate_limit_errors_total\{reason="timeout"\} (\d+)$/m, 1);

    // Redis gone: still answered at once, still limited by this replica's count...
    await outage.pause();
    for (let id = 5; id < 8; id++) {
      const t0 = Date.now();
      assertLimited(await post(g, token, id, init.session), 2, 60);
      assert.ok(Date.now() - t0 < 1_000, 'fails fast');
    }
    // ...while a user this replica has no count for is let through to the handler (the
    // shared count is unknown: fail open), which answers from its own rules (the state
    // store's 503 once it has waited redis.unavailableWait); never a 429 or a 500, and never a hang.
    const t0 = Date.now();
    const fresh = await post(g, newcomer, 1);
    assert.ok(Date.now() - t0 < 3_000, 'fails fast');
    assert.ok(fresh.status === 200 || fresh.status === 503, `${fresh.status} ${fresh.text}`);
    if (fresh.status === 503) assert.equal((JSON.parse(fresh.text) as { error: { code: number } }).error.code, -32013, 'the state store answered, not the limiter');
    // Requests that need no state are plainly served.
    const health = await fetch(`${g.url}/healthz`, { signal: AbortSignal.timeout(REQUEST_MS) });
    assert.equal(health.status, 200);
    // Each failed sync (one per flush interval at most) is counted.
    await waitForSample(g, /^switchboard_rate_limit_errors_total\{reason="error"\} (\d+)$/m, 1);
  });
});
