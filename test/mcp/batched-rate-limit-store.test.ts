/**
 * The batched Redis rate-limit store (src/state/batched-rate-limit-store.ts) against a real
 * Redis: two store instances on one Redis act as two replicas. Shows: every request is
 * answered synchronously (never waiting for Redis); a burst is limited locally; replicas
 * share the budget once a flush has carried the counts (within one flush interval, with the
 * documented lag); a handful of requests for one user cost one script call; windows follow
 * the Redis key's TTL and reset; a stalled or stopped Redis is reported and the local limit
 * holds, and the counts catch up when it is back; the tracked keys are bounded; close()
 * stops the timers and sends what is pending.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { BatchedRateLimitStore, FLUSH_INTERVAL_MS, type BatchedRateLimitStoreOptions } from '../../src/state/batched-rate-limit-store.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const WINDOW = 60_000;
const NS = 'rl:';

let redis: RedisHandle;
const clients: Redis[] = [];
const stores: BatchedRateLimitStore[] = [];

before(async () => {
  redis = await startRedis();
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  for (const c of clients) c.disconnect();
  await redis?.stop();
});

/** A client configured as the gateway's RedisStore configures its own (fail fast, no queue). */
async function client(url: string, keyPrefix: string): Promise<Redis> {
  const c = new Redis(url, { keyPrefix, maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000, retryStrategy: (n) => Math.min(n * 50, 300) });
  c.on('error', () => {});
  clients.push(c);
  await waitUntil(async () => (c.status === 'ready' ? true : undefined), { what: 'Redis client ready', timeoutMs: 5_000, intervalMs: 10 });
  return c;
}

/** A plain client for inspecting Redis (no prefix). */
async function inspector(url: string): Promise<Redis> {
  return client(url, '');
}

function store(options: Omit<BatchedRateLimitStoreOptions, 'namespace'> & { namespace?: string }): BatchedRateLimitStore {
  const s = new BatchedRateLimitStore({ namespace: NS, ...options });
  stores.push(s);
  return s;
}

/** One request; the store must answer before `incr` returns (no waiting for Redis). */
function hit(s: BatchedRateLimitStore, key: string, window = WINDOW, max = 10): { current: number; ttl: number } {
  let answer: { current: number; ttl: number } | undefined;
  s.incr(
    key,
    (error, result) => {
      assert.equal(error, null);
      answer = result;
    },
    window,
    max,
  );
  assert.ok(answer, 'answered synchronously');
  return answer;
}

function peek(s: BatchedRateLimitStore, key: string): { current: number; ttl: number } {
  let answer: { current: number; ttl: number } | undefined;
  s.read(key, (_e, r) => (answer = r));
  assert.ok(answer);
  return answer;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (bounded) until `s` has sent everything for `key` and read back `expected`; returns how long it took. */
async function syncedTo(s: BatchedRateLimitStore, key: string, expected: number, timeoutMs = 2_000): Promise<number> {
  const started = Date.now();
  await waitUntil(
    async () => {
      const state = s.inspect(key);
      return state && state.synced === expected && state.inFlight === 0 && state.pending === 0 ? true : undefined;
    },
    { what: `${key} synced to ${expected}`, timeoutMs, intervalMs: 5, details: () => JSON.stringify(s.inspect(key)) },
  );
  return Date.now() - started;
}

describe('BatchedRateLimitStore', () => {
  test('two replicas on one Redis share the budget: each sees the other at its next flush, within one interval', async () => {
    const [ra, rb, look] = await Promise.all([client(redis.url, 'share:'), client(redis.url, 'share:'), inspector(redis.url)]);
    const a = store({ redis: ra });
    const b = store({ redis: rb });
    const max = 10;

    // Replica A: 6 requests, counted locally and exactly.
    assert.deepEqual([1, 2, 3, 4, 5, 6].map(() => hit(a, 'alice', WINDOW, max).current), [1, 2, 3, 4, 5, 6]);
    await syncedTo(a, 'alice', 6);
    assert.equal(await look.get('share:rl:alice'), '6', 'one counter in Redis');

    // Replica B's first request for Alice is decided from what B knows (nothing yet: the
    // documented lag), and its flush reads A's 6 back within about one interval.
    assert.equal(hit(b, 'alice', WINDOW, max).current, 1);
    const lag = await syncedTo(b, 'alice', 7);
    assert.ok(lag <= FLUSH_INTERVAL_MS + 400, `B saw A's requests after ${lag} ms`);
    // B now spends the rest of the shared budget and is refused past it.
    assert.deepEqual([1, 2, 3, 4].map(() => hit(b, 'alice', WINDOW, max).current), [8, 9, 10, 11]);
    // The windows agree: B adopted the TTL of the key A created.
    assert.ok(Math.abs(peek(a, 'alice').ttl - peek(b, 'alice').ttl) < 250, `${peek(a, 'alice').ttl} vs ${peek(b, 'alice').ttl}`);

    await syncedTo(b, 'alice', 11);

    // A last read 6: its next request is decided on that (allowed: the overshoot is bounded by
    // the requests a replica takes within one flush interval after others spent the budget)...
    assert.equal(hit(a, 'alice', WINDOW, max).current, 7);
    // ...and its flush brings B's 5 in, so A refuses from then on.
    await syncedTo(a, 'alice', 12);
    assert.ok(hit(a, 'alice', WINDOW, max).current > max);
    await Promise.all([a.flush(), b.flush()]);
    await waitUntil(async () => ((await look.get('share:rl:alice')) === '13' ? true : undefined), { what: 'Redis counter 13', timeoutMs: 2_000, intervalMs: 10 });
    const ttl = await look.pttl('share:rl:alice');
    assert.ok(ttl > 0 && ttl <= WINDOW, `TTL ${ttl}`);
    // Another user is not affected.
    assert.equal(hit(a, 'bob', WINDOW, max).current, 1);
  });

  test('a burst on one replica is limited at once, and N requests within one interval cost one script call', async () => {
    const dedicated = await startRedis();
    try {
      const [r, look] = await Promise.all([client(dedicated.url, 'burst:'), inspector(dedicated.url)]);
      const s = store({ redis: r });
      // Load the script once (the first EVALSHA gets NOSCRIPT and is followed by EVAL).
      hit(s, 'warm-up');
      await s.flush();
      assert.equal(await look.get('burst:rl:warm-up'), '1');

      const before = await commandStats(look);
      const started = Date.now();
      const answers = Array.from({ length: 200 }, () => hit(s, 'carol', WINDOW, 5));
      assert.ok(Date.now() - started < 100, 'decided locally, without waiting for Redis');
      assert.deepEqual(
        answers.map((a) => a.current),
        Array.from({ length: 200 }, (_, i) => i + 1),
      );
      assert.equal(answers.filter((a) => a.current <= 5).length, 5, 'the first 5 pass, the other 195 are over the limit');
      assert.ok(answers.every((a) => a.ttl > 0 && a.ttl <= WINDOW));
      await waitUntil(async () => ((await look.get('burst:rl:carol')) === '200' ? true : undefined), { what: 'the burst flushed', timeoutMs: 2_000, intervalMs: 20 });
      const after = await commandStats(look);
      // INFO calls excluded: the GETs above are ours (counted separately), the rest is the store.
      const storeCalls = diff(after, before, ['info', 'get']);
      assert.deepEqual(Object.keys(storeCalls.roundTrips), ['evalsha'], JSON.stringify(storeCalls));
      assert.equal(storeCalls.roundTrips.evalsha, 1, `one round trip for 200 requests: ${JSON.stringify(storeCalls)}`);
      assert.ok(storeCalls.total <= 3, `EVALSHA + INCRBY + PEXPIRE at most: ${JSON.stringify(storeCalls)}`);
      // total_commands_processed agrees (our INFO/GET calls subtracted).
      assert.ok(after.processed - before.processed - storeCalls.ours <= 3, `${after.processed - before.processed} commands, ${storeCalls.ours} ours`);
    } finally {
      await dedicated.stop();
    }
  });

  test('the window follows the Redis key and resets: a new window starts with a fresh count', async () => {
    const [r, look] = await Promise.all([client(redis.url, 'window:'), inspector(redis.url)]);
    const s = store({ redis: r });
    const window = 1_000;
    assert.deepEqual([1, 2, 3, 4].map(() => hit(s, 'dave', window, 3).current), [1, 2, 3, 4]);
    await syncedTo(s, 'dave', 4);
    const pttl = await look.pttl('window:rl:dave');
    assert.ok(pttl > 0 && pttl <= window, `key TTL ${pttl}`);
    const { ttl } = hit(s, 'dave', window, 3);
    assert.ok(ttl > 0 && ttl <= window && Math.abs(ttl - pttl) < 250, `local window end ${ttl} ms vs key TTL ${pttl} ms`);
    await sleep(ttl + 50);
    assert.equal(await look.exists('window:rl:dave'), 0, 'the Redis key expired with the window');
    assert.equal(hit(s, 'dave', window, 3).current, 1, 'a fresh window');
    await syncedTo(s, 'dave', 1);
    assert.equal(await look.get('window:rl:dave'), '1', 'increments of the old window were not carried into the new one');
  });

  test('Redis stalled, then stopped: answers stay instant, the local limit holds, failures are reported, counts catch up afterwards', async () => {
    const outage = await startRedis();
    try {
      const [r, look] = await Promise.all([client(outage.url, 'out:'), inspector(outage.url)]);
      const failures: string[] = [];
      const s = store({ redis: r, onFailure: (reason) => failures.push(reason) });
      assert.equal(hit(s, 'erin', WINDOW, 3).current, 1);
      await syncedTo(s, 'erin', 1);

      // Stalled (CLIENT PAUSE): the flush hangs, requests do not.
      await look.client('PAUSE', 800, 'ALL');
      const started = Date.now();
      assert.deepEqual([2, 3, 4].map(() => hit(s, 'erin', WINDOW, 3).current), [2, 3, 4], 'the 4th is over the limit, decided locally');
      assert.ok(Date.now() - started < 50);
      await waitUntil(async () => (failures.includes('timeout') ? true : undefined), { what: 'a timeout reported', timeoutMs: 2_000, intervalMs: 10 });
      assert.equal(hit(s, 'erin', WINDOW, 3).current, 5, 'still counting while the flush hangs');
      // The stalled call completes after the pause and the rest follows.
      await syncedTo(s, 'erin', 5, 3_000);
      assert.equal(await look.get('out:rl:erin'), '5');

      // Stopped: every flush fails at once; requests are still answered at once, and limited.
      await outage.pause();
      await waitUntil(async () => (r.status !== 'ready' ? true : undefined), { what: 'the client to notice', timeoutMs: 5_000, intervalMs: 10 });
      const errorsBefore = failures.filter((f) => f === 'error').length;
      for (let i = 6; i <= 10; i++) {
        const t0 = Date.now();
        assert.equal(hit(s, 'erin', WINDOW, 3).current, i);
        assert.ok(Date.now() - t0 < 20);
      }
      assert.equal(hit(s, 'frank', WINDOW, 3).current, 1, 'another user is not limited by the outage (fail open for the shared count)');
      await waitUntil(async () => (failures.filter((f) => f === 'error').length > errorsBefore ? true : undefined), { what: 'errors reported', timeoutMs: 2_000, intervalMs: 10 });
      await sleep(3 * FLUSH_INTERVAL_MS);
      assert.equal(peek(s, 'erin').current, 10, 'failed increments are kept, not lost or doubled');
      const errors = failures.filter((f) => f === 'error').length - errorsBefore;
      assert.ok(errors <= 1 + Math.ceil((3 * FLUSH_INTERVAL_MS + 2_000) / FLUSH_INTERVAL_MS), `at most one failed call per interval: ${errors}`);

      // Back (empty, no persistence): the increments kept during the outage are sent.
      await outage.resume();
      await waitUntil(async () => ((await look.get('out:rl:erin').catch(() => null)) === '5' ? true : undefined), { what: 'erin re-sent', timeoutMs: 10_000, intervalMs: 50 });
      assert.equal(await look.get('out:rl:frank'), '1');
      assert.equal(peek(s, 'erin').current, 5, 'the shared count (this window, as Redis has it now) is adopted');
    } finally {
      await outage.stop();
    }
  });

  test('memory is bounded: at most maxKeys tracked (evicted keys still flushed), ended windows swept', async () => {
    const [r, look] = await Promise.all([client(redis.url, 'evict:'), inspector(redis.url)]);
    const s = store({ redis: r, maxKeys: 100, sweepIntervalMs: 100 });
    for (let i = 0; i < 1_000; i++) hit(s, `user-${i}`, 500, 10);
    assert.equal(s.size, 100);
    assert.equal(hit(s, 'user-999', 500, 10).current, 2, 'recent keys are kept');
    assert.equal(hit(s, 'user-0', 500, 10).current, 1, 'the least recently used were evicted');
    await s.flush();
    await s.flush();
    assert.equal(await look.get('evict:rl:user-1'), '1', "an evicted key's increment was still sent");
    assert.equal(await look.get('evict:rl:user-999'), '2');
    // Idle past the window: the sweep drops them.
    await waitUntil(async () => (s.size === 0 ? true : undefined), { what: `keys swept (${s.size} left)`, timeoutMs: 2_000, intervalMs: 20 });
  });

  test('the most recently used key, kept at hand, follows evictions and sweeps', async () => {
    const r = await client(redis.url, 'mru:');
    const s = store({ redis: r, maxKeys: 2, sweepIntervalMs: 50 });
    hit(s, 'a', 60_000, 10);
    hit(s, 'b', 60_000, 10);
    assert.equal(hit(s, 'a', 60_000, 10).current, 2);
    assert.equal(hit(s, 'a', 60_000, 10).current, 3, 'the same user again');
    hit(s, 'c', 60_000, 10);
    assert.equal(s.inspect('b'), undefined, 'b was the least recently used, not a');
    assert.equal(hit(s, 'a', 60_000, 10).current, 4);
    // A short window that ends and is swept: the user's next request is tracked again.
    hit(s, 'solo', 100, 10);
    await waitUntil(async () => (s.inspect('solo') === undefined ? true : undefined), { what: 'solo swept', timeoutMs: 2_000, intervalMs: 20 });
    assert.equal(hit(s, 'solo', 100, 10).current, 1);
    assert.ok(s.inspect('solo'), 'tracked again after the sweep');
    await s.close();
  });

  test('close() stops the timers and sends what is pending', async () => {
    const [r, look] = await Promise.all([client(redis.url, 'close:'), inspector(redis.url)]);
    const s = store({ redis: r, flushIntervalMs: 60_000 });
    for (let i = 0; i < 3; i++) hit(s, 'grace');
    assert.equal(await look.get('close:rl:grace'), null, 'nothing sent yet');
    await s.close();
    assert.equal(await look.get('close:rl:grace'), '3');
    hit(s, 'grace');
    await sleep(50);
    assert.equal(await look.get('close:rl:grace'), '3', 'no flush after close');
  });
});

interface Stats {
  calls: Record<string, number>;
  processed: number;
}

async function commandStats(look: Redis): Promise<Stats> {
  const [commands, stats] = await Promise.all([look.info('commandstats'), look.info('stats')]);
  const calls: Record<string, number> = {};
  for (const m of commands.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
  return { calls, processed: Number(/^total_commands_processed:(\d+)/m.exec(stats)?.[1] ?? 0) };
}

/** Per-command call deltas; `roundTrips` = commands a client sent (scripts), `total` = all but `ours`. */
function diff(after: Stats, before: Stats, exclude: string[]): { roundTrips: Record<string, number>; total: number; ours: number; all: Record<string, number> } {
  const all: Record<string, number> = {};
  for (const [name, n] of Object.entries(after.calls)) {
    const d = n - (before.calls[name] ?? 0);
    if (d > 0) all[name] = d;
  }
  let total = 0;
  let ours = 0;
  const roundTrips: Record<string, number> = {};
  for (const [name, d] of Object.entries(all)) {
    if (exclude.includes(name)) {
      ours += d;
      continue;
    }
    total += d;
    if (name === 'evalsha' || name === 'eval') roundTrips[name] = d;
  }
  return { roundTrips, total, ours, all };
}
