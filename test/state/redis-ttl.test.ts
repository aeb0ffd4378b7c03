/**
 * TTLs at the store boundary (issue 45 §2), on a real redis-server: Redis takes whole
 * milliseconds above 0 only (`SET … PX 2499.5` is "ERR value is not an integer or out of
 * range"), while the gateway computes TTLs from clocks and lifetimes — half an odd lifetime
 * is a fraction. Every operation that sets an expiry (values, sessions, in-use marks, replay
 * logs, coordinator leases and mailboxes, rate-limit windows) takes a fractional TTL, stores
 * it rounded UP (ttl.ts) and lets it expire; NaN, Infinity, 0 and negatives are refused with
 * an InvalidTtlError naming the operation, before anything reaches Redis — and the memory
 * store refuses them alike.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { BatchedRateLimitStore } from '../../src/state/batched-rate-limit-store.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { RedisCoordinator } from '../../src/state/redis-coordinator.js';
import { RedisKeys } from '../../src/state/redis-keys.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { SessionRecord, StateStore, StreamKey } from '../../src/state/store.js';
import { InvalidTtlError, wholeMs } from '../../src/state/ttl.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let redis: RedisHandle;
let store: RedisStore;
let coordinator: RedisCoordinator;
const keys = new RedisKeys(false);

before(async () => {
  redis = await startRedis();
  store = new RedisStore({ url: redis.url, keyPrefix: `sbttl-${randomUUID()}:` });
  await store.ready();
  coordinator = new RedisCoordinator(store.redis, store.keyPrefix);
});

after(async () => {
  await coordinator?.close();
  await store?.close();
  await redis?.stop();
});

const record: SessionRecord = { backend: 'hr', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 1_700_000_000_000 };
const streamKey = (): StreamKey => ({ userKey: `u-${randomUUID()}`, sessionId: `s-${randomUUID()}`, streamId: `st-${randomUUID()}` });

/**
 * The key's remaining TTL in Redis (ms), `since` the write that set it (performance.now() taken
 * before it): a whole number, at most `ttl` rounded up, and no less than what is left of it
 * after the time that has passed (plus 100 ms for Redis's own clock). A fixed slack of 500 ms
 * failed once on a clean-clone run with the machine 94 % busy: 1.75 s passed between a SET and
 * its PTTL.
 */
async function assertPttl(key: string, ttl: number, since: number): Promise<void> {
  const pttl = await store.redis.pttl(key);
  const elapsed = performance.now() - since;
  assert.ok(Number.isInteger(pttl), `PTTL of ${key} is ${pttl}`);
  assert.ok(pttl <= Math.ceil(ttl) && pttl > Math.ceil(ttl) - elapsed - 100, `PTTL ${pttl} for a TTL of ${ttl} ms set ${elapsed.toFixed(0)} ms before`);
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  await waitUntil(async () => ((await check()) ? true : undefined), { what, timeoutMs, intervalMs: 10 });
}

describe('wholeMs', () => {
  test('rounds up to whole milliseconds, never to 0', () => {
    assert.equal(wholeMs(2500.5, 't'), 2501);
    assert.equal(wholeMs(2499.5, 't'), 2500);
    assert.equal(wholeMs(1.2, 't'), 2);
    assert.equal(wholeMs(0.0001, 't'), 1);
    assert.equal(wholeMs(60_000, 't'), 60_000);
  });

  test('refuses NaN, Infinity, 0, negatives and unsafe sizes, naming the operation', () => {
    for (const bad of [Number.NaN, Infinity, -Infinity, 0, -0, -1, -0.5, 2 ** 60, '100' as unknown as number]) {
      assert.throws(() => wholeMs(bad, 'putValue'), (err: unknown) => err instanceof InvalidTtlError && err instanceof RangeError && /^putValue: a TTL must be a finite number of milliseconds above 0/.test(err.message), String(bad));
    }
  });
});

describe('RedisStore: fractional TTLs are stored rounded up and expire', () => {
  test('putValue 2500.5 ms: readable, PTTL whole and ≤ 2501, gone after it', { timeout: 15_000 }, async () => {
    const key = `v-${randomUUID()}`;
    const since = performance.now();
    await store.putValue(key, 'x', 2500.5);
    const read = await store.getValue(key);
    // Read within its lifetime, it is there. A clean-clone run of 9e60c58 on a busy machine read
    // it 2.6 s after the write, when it had expired: judged, as the PTTL is, by the time passed.
    if (performance.now() - since < 2400) assert.equal(read, 'x');
    else assert.ok(read === 'x' || read === undefined, `read ${String(read)}`);
    await assertPttl(keys.value(key), 2500.5, since);
    await eventually('the value expired', async () => (await store.getValue(key)) === undefined);
  });

  test('putValueIfAbsent 1.2 ms: set (PX 2), expires at once, and can be taken again', { timeout: 10_000 }, async () => {
    const key = `lock-${randomUUID()}`;
    assert.equal(await store.putValueIfAbsent(key, 'a', 1.2), true);
    await eventually('the 2 ms lock expired', async () => (await store.getValue(key)) === undefined, 1_000);
    const since = performance.now();
    assert.equal(await store.putValueIfAbsent(key, 'b', 2499.5), true);
    assert.equal(await store.putValueIfAbsent(key, 'c', 2499.5), false, 'held');
    await assertPttl(keys.value(key), 2499.5, since);
  });

  test('odd lifetimes halved (the exchange cache\'s margin): 4999 / 2, 333 / 2, 1 / 2', { timeout: 10_000 }, async () => {
    for (const lifetime of [4999, 333]) {
      const key = `half-${lifetime}-${randomUUID()}`;
      const since = performance.now();
      await store.putValue(key, 'x', lifetime / 2);
      assert.equal(await store.getValue(key), 'x');
      await assertPttl(keys.value(key), lifetime / 2, since);
    }
    // 1 / 2: stored with PX 1, so it may be gone before a read can see it (a CI run under load
    // did not): the claim is that Redis takes it, and that it expires.
    const tiny = `half-1-${randomUUID()}`;
    await store.putValue(tiny, 'x', 1 / 2);
    await eventually('the 1 ms value expired', async () => (await store.getValue(tiny)) === undefined, 1_000);
    const key = `short-${randomUUID()}`;
    await store.putValue(key, 'x', 150.5);
    await eventually('the 151 ms value expired', async () => (await store.getValue(key)) === undefined, 2_000);
  });

  test('sessions: create, touch and replace with fractional TTLs; in-use marks with a fractional lease', { timeout: 10_000 }, async () => {
    const userKey = `u-${randomUUID()}`;
    const sessionId = `s-${randomUUID()}`;
    let since = performance.now();
    assert.deepEqual(await store.createSession(userKey, sessionId, record, 999.5, 10), []);
    await assertPttl(keys.session(userKey, sessionId), 999.5, since);
    since = performance.now();
    assert.deepEqual(await store.touchSession(userKey, sessionId, 1234.5), record);
    await assertPttl(keys.session(userKey, sessionId), 1234.5, since);
    since = performance.now();
    assert.equal(await store.replaceSession(userKey, sessionId, { ...record, backend: 'crm' }, 777.7), true);
    await assertPttl(keys.session(userKey, sessionId), 777.7, since);
    since = performance.now();
    await store.markSessionsInUse(userKey, [sessionId], 333.3);
    await assertPttl(keys.sessionsInUse(userKey), 333.3, since);
    // Polled without touching (a touch would slide the TTL).
    await eventually('the session expired', async () => (await store.redis.exists(keys.session(userKey, sessionId))) === 0, 3_000);
  });

  test('replay logs: appendEvents with a fractional ttl', { timeout: 10_000 }, async () => {
    const key = streamKey();
    const since = performance.now();
    await store.appendEvents(key, [{ seq: 1, data: '{}' }], { maxEvents: 10, ttlMs: 400.4 });
    assert.equal((await store.readEvents(key)).length, 1);
    await assertPttl(keys.stream(key), 400.4, since);
    await eventually('the log expired', async () => (await store.readEvents(key)).length === 0, 3_000);
  });

  test('coordinator: claim, renew and hold leases and a mailbox with fractional TTLs', { timeout: 10_000 }, async () => {
    const key = streamKey();
    let since = performance.now();
    const claim = await coordinator.claimStandalone(key.userKey, key.sessionId, key.streamId, 500.5, false);
    assert.equal(claim.granted, true);
    await assertPttl(keys.standalone(key.userKey, key.sessionId), 500.5, since);
    since = performance.now();
    assert.equal(await coordinator.renewStandalone(key.userKey, key.sessionId, key.streamId, 1500.5), true);
    await assertPttl(keys.standalone(key.userKey, key.sessionId), 1500.5, since);
    since = performance.now();
    await coordinator.holdStream(key, 700.7);
    assert.equal(await coordinator.streamHolder(key), coordinator.replicaId);
    await assertPttl(keys.hold(key), 700.7, since);
    since = performance.now();
    await coordinator.postToMailbox(key.userKey, key.sessionId, 'm', 900.9, 5);
    await assertPttl(keys.mailbox(key.userKey, key.sessionId), 900.9, since);
    await eventually('the hold expired', async () => (await coordinator.streamHolder(key)) === undefined, 3_000);
  });

  test('rate limiter: a fractional window syncs (PEXPIRE whole ms), no failure reported', { timeout: 10_000 }, async () => {
    const failures: string[] = [];
    const limiter = new BatchedRateLimitStore({ redis: store.redis, namespace: `rl-${randomUUID()}:`, onFailure: (reason, err) => failures.push(`${reason} ${err?.message}`) });
    try {
      limiter.incr('alice', () => {}, 2000.5, 10);
      await limiter.flush();
      assert.deepEqual(failures, []);
      assert.equal(limiter.inspect('alice')?.synced, 1);
      assert.ok(limiter.inspect('alice')!.ttl <= 2001);
    } finally {
      await limiter.close();
    }
  });
});

/** Every TTL-taking operation of the store, with `ttl`: each must be refused. */
function ttlOperations(s: StateStore): Array<[string, (ttl: number) => Promise<unknown>]> {
  const userKey = `u-${randomUUID()}`;
  return [
    ['putValue', (ttl) => s.putValue(`bad-${randomUUID()}`, 'x', ttl)],
    ['putValueIfAbsent', (ttl) => s.putValueIfAbsent(`bad-${randomUUID()}`, 'x', ttl)],
    ['createSession', (ttl) => s.createSession(userKey, `s-${randomUUID()}`, record, ttl)],
    ['touchSession', (ttl) => s.touchSession(userKey, 's-none', ttl)],
    ['replaceSession', (ttl) => s.replaceSession(userKey, 's-none', record, ttl)],
    ['markSessionsInUse', (ttl) => s.markSessionsInUse(userKey, ['s-none'], ttl)],
    ['appendEvents', (ttl) => s.appendEvents(streamKey(), [{ seq: 1, data: '{}' }], { maxEvents: 10, ttlMs: ttl })],
  ];
}

const NONSENSE = [Number.NaN, 0, -1, -2500.5, Infinity];

for (const [name, open] of [
  ['RedisStore', () => store],
  ['MemoryStore', () => new MemoryStore()],
] as const) {
  describe(`${name}: nonsense TTLs are refused clearly and store nothing`, () => {
    test('NaN, 0, negatives and Infinity: InvalidTtlError naming the operation', async () => {
      const s: StateStore = open();
      for (const [operation, run] of ttlOperations(s)) {
        for (const bad of NONSENSE) {
          await assert.rejects(run(bad), (err: unknown) => err instanceof InvalidTtlError && err.message.startsWith(`${operation}: a TTL must be a finite number of milliseconds above 0, not ${bad}`), `${operation}(${bad})`);
        }
      }
      const key = `never-${randomUUID()}`;
      await assert.rejects(s.putValue(key, 'x', Number.NaN), InvalidTtlError);
      await assert.rejects(s.putValueIfAbsent(key, 'x', 0), InvalidTtlError);
      assert.equal(await s.getValue(key), undefined, 'nothing stored');
      await s.putValue(key, 'kept');
      assert.equal(await s.getValue(key), 'kept', 'no TTL at all still means no expiry');
      if (s.kind === 'memory') await s.close();
    });
  });
}

describe('RedisCoordinator: nonsense TTLs are refused', () => {
  test('claim, renew, hold and mailbox', async () => {
    const key = streamKey();
    for (const bad of NONSENSE) {
      await assert.rejects(coordinator.claimStandalone(key.userKey, key.sessionId, key.streamId, bad, false), /claimStandalone: a TTL must be/);
      await assert.rejects(coordinator.renewStandalone(key.userKey, key.sessionId, key.streamId, bad), /renewStandalone: a TTL must be/);
      await assert.rejects(coordinator.holdStream(key, bad), /holdStream: a TTL must be/);
      await assert.rejects(coordinator.postToMailbox(key.userKey, key.sessionId, 'm', bad, 5), /postToMailbox: a TTL must be/);
    }
    assert.equal(await coordinator.standaloneHolder(key.userKey, key.sessionId), undefined);
    assert.equal(await coordinator.streamHolder(key), undefined);
  });
});
