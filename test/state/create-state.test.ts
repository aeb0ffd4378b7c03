/**
 * createState (src/state/create-state.ts): the store, the coordinator and the rate-limit
 * counter come from the config — in memory without `redis`, all on that Redis under
 * `redis.keyPrefix` with it, so that replicas share sessions, claims and budgets — and
 * close() releases them in order: the counter's pending counts still reach Redis, then the
 * connection is closed; a store given by the caller is used and left open.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { createState, type State } from '../../src/state/create-state.js';
import type { RateLimitCount } from '../../src/state/rate-limit-store.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { SessionRecord } from '../../src/state/store.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const record: SessionRecord = { backend: 'demo', backendSessionId: 'b-1', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 1_700_000_000_000 };

function config(redis?: { url: string; keyPrefix: string }): Config {
  return parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'demo', url: 'http://127.0.0.1:9999/mcp' }],
    ...(redis ? { redis } : {}),
  });
}

function quietLog() {
  const warnings: string[] = [];
  return { warnings, warn: (message: string) => void warnings.push(message) };
}

function count(state: State, key: string): RateLimitCount {
  let result: RateLimitCount | undefined;
  state.rateCounter.incr(key, (error, value) => (result = error ? undefined : value), 60_000, 100);
  assert.ok(result, 'the counter answers at once');
  return result;
}

describe('createState without redis', () => {
  test('everything in memory, with a warning that only one replica may run', async () => {
    const log = quietLog();
    const state = await createState(config(), log);
    assert.equal(state.store.kind, 'memory');
    assert.deepEqual(log.warnings, ['no redis configured: state is in memory, so run one replica only']);
    assert.deepEqual([count(state, 'u').current, count(state, 'u').current], [1, 2], 'counted in process');
    const claim = await state.coordinator.claimStandalone('u', 's', 'st', 60_000, false);
    assert.equal(claim.granted, true);
    await state.close();
  });
});

let redis: RedisHandle | undefined;
let raw: Redis | undefined;

describe('createState with redis', () => {
  before(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
  });
  after(async () => {
    raw?.disconnect();
    await redis?.stop();
  });

  /** A replica's state; closed after the test unless the test closed it. */
  async function replica(t: TestContext, keyPrefix: string, store?: RedisStore): Promise<State> {
    const state = await createState(config({ url: redis!.url, keyPrefix }), quietLog(), { store });
    t.after(() => state.close());
    return state;
  }

  test('two replicas share sessions, standalone claims and rate-limit counts in that Redis, under redis.keyPrefix', async (t) => {
    const keyPrefix = `sbcs-${randomUUID()}:`;
    const [a, b] = [await replica(t, keyPrefix), await replica(t, keyPrefix)];
    assert.equal(a.store.kind, 'redis');
    await a.store.createSession('alice', 's1', record, 60_000);
    assert.deepEqual(await b.store.touchSession('alice', 's1', 60_000), record);
    await a.coordinator.claimStandalone('alice', 's1', 'st-a', 60_000, false);
    assert.deepEqual(await b.coordinator.standaloneHolder('alice', 's1'), { replicaId: a.coordinator.replicaId, streamId: 'st-a' });

    count(a, 'alice');
    count(a, 'alice');
    // The counter's key name is the one running replicas use: `<redis.keyPrefix>rl:<userKey>`.
    await waitUntil(async () => ((await raw!.get(`${keyPrefix}rl:alice`)) === '2' ? true : undefined), { what: 'the counts synced to Redis', timeoutMs: 5_000, intervalMs: 20 });
    count(b, 'alice');
    await waitUntil(async () => (count(b, 'alice').current >= 4 ? true : undefined), { what: "b to see a's counts", timeoutMs: 5_000, intervalMs: 50 });
  });

  test("close() sends the counter's pending counts, then closes the connection it made", async (t) => {
    const keyPrefix = `sbcs-${randomUUID()}:`;
    const state = await replica(t, keyPrefix);
    for (let i = 0; i < 3; i++) count(state, 'bob');
    // Closed before the counter's first flush is due (100 ms): close() must send the counts.
    await state.close();
    assert.equal(await raw!.get(`${keyPrefix}rl:bob`), '3');
    const connection = (state.store as RedisStore).redis;
    await waitUntil(async () => (connection.status === 'end' ? true : undefined), { what: 'the connection to close', timeoutMs: 5_000, intervalMs: 20 });
  });

  test('a given store is used, coordinated over, and left open by close()', async (t) => {
    const keyPrefix = `sbcs-${randomUUID()}:`;
    const given = new RedisStore({ url: redis!.url, keyPrefix });
    await given.ready();
    t.after(() => given.close());
    const state = await createState(config({ url: redis!.url, keyPrefix }), quietLog(), { store: given });
    assert.equal(state.store, given);
    const other = await replica(t, keyPrefix);
    await state.coordinator.claimStandalone('carol', 's', 'st-given', 60_000, false);
    assert.deepEqual(await other.coordinator.standaloneHolder('carol', 's'), { replicaId: state.coordinator.replicaId, streamId: 'st-given' });
    await state.close();
    assert.equal(given.redis.status, 'ready');
    assert.equal(await given.ping(), undefined);
  });
});
