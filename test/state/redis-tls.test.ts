/**
 * Redis over TLS (issue 17; SPEC §8 `redis.tls`, `rediss://`, `redis.username`/`password`):
 * a real `redis-server --tls-port` with a CA made by the test (test/helpers/redis-tls.ts),
 * client certificates required, and an ACL user. The config goes through the real loader
 * (the password from `${VAR}`) into the store exactly as app.ts makes it; without the CA,
 * with another server name, without the client certificate, with a wrong password or over
 * plain TCP it does not connect. (Sentinel and cluster go through the same wiring in
 * test/replicas/sentinel-failover.test.ts and replicas-cluster.test.ts, with real gateways.)
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import { RedisStore } from '../../src/state/redis-store.js';
import { startTlsRedis, type TlsRedisHandle } from '../helpers/redis-tls.js';

let redis: TlsRedisHandle;

before(async () => {
  redis = await startTlsRedis();
});

after(async () => {
  await redis?.stop();
});

/** The `redis` block an operator would write for this server. */
const block = (overrides: Record<string, unknown> = {}) => ({
  url: redis.url,
  tls: { ca: redis.ca, cert: redis.cert, key: redis.key, servername: redis.servername },
  username: redis.username,
  password: '${REDIS_PASSWORD}',
  keyPrefix: `sbtls-${randomUUID()}:`,
  ...overrides,
});

/** The store app.ts would make from that block. */
function storeFor(redisBlock: Record<string, unknown>, password = redis.password): RedisStore {
  const config = parseConfig(
    { publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://idp.example.com', audience: 'aud' }, backends: [{ name: 'demo', url: 'http://127.0.0.1:9/mcp' }], redis: redisBlock },
    { REDIS_PASSWORD: password },
  );
  return new RedisStore({ ...config.redis! });
}

describe('Redis over TLS', () => {
  test('rediss:// with the CA, a client certificate, the server name and an ACL user: the store works', async (t) => {
    const store = storeFor(block());
    t.after(() => store.close());
    await store.ready(10_000);
    await store.createSession('user-tls', 'session-1', { backend: 'demo', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 1 }, 60_000);
    assert.equal((await store.touchSession('user-tls', 'session-1', 60_000))?.backend, 'demo');
    const key = { userKey: 'user-tls', sessionId: 'session-1', streamId: 'st' };
    await store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }, { seq: 1, data: '{}' }], { maxEvents: 10, ttlMs: 60_000 });
    assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 1]);
    await store.ping();
    assert.equal(store.describe(), 'redis standalone, connection ready');
  });

  test('the certificate is verified and the user authenticated: each missing piece is refused', async () => {
    const { tls } = block();
    const attempts: Array<[string, RedisStore]> = [
      ['no CA (the system CAs do not know the test CA)', storeFor(block({ tls: { ...tls, ca: undefined } }))],
      ['another server name', storeFor(block({ tls: { ...tls, servername: 'other.test' } }))],
      ['no client certificate', storeFor(block({ tls: { ca: tls.ca, servername: tls.servername } }))],
      ['a wrong password', storeFor(block(), 'not-the-password')],
      ['plain redis:// to a TLS port', storeFor(block({ url: redis.url.replace('rediss:', 'redis:'), tls: undefined }))],
    ];
    try {
      const outcomes = await Promise.all(attempts.map(([, store]) => store.ready(3_000).then(() => 'connected', (err: Error) => err.message)));
      attempts.forEach(([what], i) => assert.match(outcomes[i]!, /not reachable/, `${what}: refused`));
    } finally {
      await Promise.all(attempts.map(([, store]) => store.close()));
    }
  });

  test('a socket that reports a second error, or an alert while closing, does not end the process', async (t) => {
    const store = storeFor(block());
    t.after(() => store.close());
    await store.ready(10_000);
    const socket = (store as unknown as { redis: { stream: NodeJS.EventEmitter } }).redis.stream;
    // ioredis listens for a socket's first error only; the TLS alert that failed CI came after.
    socket.emit('error', new Error('tlsv1 alert decode error (first)'));
    assert.doesNotThrow(() => socket.emit('error', new Error('tlsv1 alert decode error (second)')));
    await store.close();
    assert.doesNotThrow(() => socket.emit('error', new Error('alert after close')));
  });
});
