/**
 * The rate limiter's store (rate-limit.ts) that shares each user's budget across replicas through Redis
 * without a Redis round trip on the request path.
 *
 * Why: the gateway's performance target (issue 7; `bench/README.md`, "Targets") allows at
 * most ONE Redis round trip per proxied MCP message, and the SSE path already spends it on
 * the replay log. A plain Redis counter costs one more per request (a Lua INCR +
 * PEXPIRE), so a limited SSE answer would cost two. This store decides locally and talks to
 * Redis in the background, in batches.
 *
 * How: per key (user) and fixed window, requests are counted locally and decided at once:
 *
 *     current = synced + inFlight + pending
 *
 * where `synced` is the Redis counter as last read back, `inFlight` the increments sent but
 * not yet acknowledged and `pending` those not sent yet (the request being decided included).
 * A timer ({@link FLUSH_INTERVAL_MS}, started by the first pending increment, `unref()`ed)
 * sends every key's pending increments in ONE script call (INCRBY, then PEXPIRE when the key
 * was just created; PTTL otherwise) and reads back each key's total and TTL. So there is at
 * most one Redis call per flush interval for all users together, whatever the request rate
 * (at most one call in flight at a time; at most {@link MAX_KEYS_PER_CALL} keys per call).
 * Windows are fixed: the Redis key holds the count, its TTL
 * is the window, set when the key is created; every replica adopts the key's TTL as the end of
 * its local window, so replicas agree on window boundaries to within a round trip. A request
 * that arrives after the local window ended starts a new one (and increments not yet sent for
 * the old window are dropped, as the old Redis key is gone too). Over the limit requests count
 * too.
 *
 * Precision (the trade-off): each replica counts its own requests exactly and sees the other
 * replicas' requests only once they have been flushed (up to one interval T plus a round trip
 * after they arrived) AND it has read them back with its own next flush (which happens only
 * when it has a request for that user; again up to T plus a round trip). Hence:
 * - one replica: exact;
 * - R replicas: in one window a user can get past `max` by at most the requests they send,
 *   summed over all replicas, during about 2 × (T + RTT) around the moment the shared count
 *   reaches `max` — with R replicas each receiving r requests/s from that user, at most
 *   ≈ R × r × 2 × (T + RTT) beyond `max` (T = 100 ms, RTT ≪ T: ≈ 0.2 × R × r; e.g. 3
 *   replicas × 20/s → up to ≈ 12 more than `max`). In particular the first request a replica
 *   sees for a user after being idle for that user is decided on the count it last read,
 *   however old, and corrects itself with that request's flush. For a limit meant to stop a
 *   runaway client loop (600/min by default) this is immaterial; it is not an exact quota.
 * - The 429's Retry-After / `ttl` is the local view of the window end (±RTT of the Redis TTL).
 *
 * Redis unavailable: requests are still answered at once from the local counts, i.e. the
 * limit degrades to per replica (at most R × `max` for the cluster: fail open with respect to
 * the cluster-wide count, never with respect to the replica's own). A failed flush keeps its
 * increments pending and retries them with the next flush, so the shared count catches up
 * once Redis is back (same window only). Each failed call is reported through `onFailure`
 * ('error'), and a call not answered within {@link SLOW_FLUSH_MS} once ('timeout'); no
 * request ever waits for Redis.
 *
 * Memory: at most `maxKeys` keys are tracked (least recently used evicted first; an evicted
 * key's increments not yet sent are still flushed), and keys whose window has ended (no
 * request since) are swept every {@link SWEEP_INTERVAL_MS}. Call {@link close} on shutdown:
 * it stops the timers and makes one last bounded attempt to send what is pending.
 */
import type { RateLimitCallback, RateLimitFailureListener, RateLimitStore } from './rate-limit-store.js';
import { isCluster, type RedisClient } from './redis-connection.js';
import { RATE_LIMIT_FLUSH } from './redis-scripts.js';
import { wholeMs } from './ttl.js';

/** How often pending increments are sent to Redis (and the shared counts read back). */
export const FLUSH_INTERVAL_MS = 100;
/** A flush not answered within this is reported as a timeout (the requests never wait for it). */
export const SLOW_FLUSH_MS = 250;
/** Default cap on the keys (users) tracked locally. */
export const MAX_KEYS = 10_000;
/** How often keys whose window has ended are dropped. */
export const SWEEP_INTERVAL_MS = 10_000;
/** Keys per script call (a script blocks Redis while it runs: keep each one short). */
export const MAX_KEYS_PER_CALL = 1_000;

type FlushingRedis = RedisClient & {
  sbRateLimitFlush(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
};

/** One key's state in its current window. */
interface Entry {
  /** The Redis key, without the client's own keyPrefix. */
  readonly redisKey: string;
  windowMs: number;
  /** Local clock (ms since epoch) at which the current window ends. */
  windowEnd: number;
  /** Bumped when a new window starts: answers for an older window are ignored. */
  generation: number;
  /** The Redis counter as last read back, for this window. */
  synced: number;
  /** Sent to Redis, not yet acknowledged. */
  inFlight: number;
  /** Counted here, not sent yet. */
  pending: number;
}

interface Sent {
  entry: Entry;
  generation: number;
  n: number;
}

export interface BatchedRateLimitStoreOptions {
  /** The client to use (its `keyPrefix` applies); the store defines one script on it. */
  redis: RedisClient;
  /**
   * Prefix of the keys, e.g. `rl:` → `<keyPrefix>rl:<key>`. In a Redis Cluster, where one
   * script's keys must share a hash slot, it is also the keys' hash tag (`rl:{rl:}<key>`):
   * all counters sit on one shard, so a flush stays ONE call whatever the number of users
   * (the counters are a few bytes each and written ten times a second at most per replica).
   */
  namespace: string;
  /** Default {@link FLUSH_INTERVAL_MS}. */
  flushIntervalMs?: number;
  /** Default {@link SLOW_FLUSH_MS}. */
  slowFlushMs?: number;
  /** Default {@link MAX_KEYS}. */
  maxKeys?: number;
  /** Default {@link SWEEP_INTERVAL_MS}. */
  sweepIntervalMs?: number;
  /** A flush failed ('error', once per call) or was slow ('timeout', once per call); more listeners: {@link BatchedRateLimitStore.onFailure}. */
  onFailure?: RateLimitFailureListener;
}

export class BatchedRateLimitStore implements RateLimitStore {
  readonly #redis: FlushingRedis;
  readonly #namespace: string;
  readonly #flushIntervalMs: number;
  readonly #slowFlushMs: number;
  readonly #maxKeys: number;
  readonly #failureListeners: RateLimitFailureListener[] = [];
  /** Map order is recency: the first entry is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  /** The last entry of #entries (the most recently used) and the key it was asked for; cleared when it leaves the map. */
  #mru: Entry | undefined;
  #mruKey: string | undefined;
  /** Entries with pending increments (evicted ones included, so their counts still go out). */
  readonly #dirty = new Set<Entry>();
  readonly #sweepTimer: NodeJS.Timeout;
  #flushTimer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #closed = false;

  constructor(options: BatchedRateLimitStoreOptions) {
    this.#redis = options.redis as FlushingRedis;
    this.#namespace = isCluster(options.redis) ? `${options.namespace}{${options.namespace}}` : options.namespace;
    this.#flushIntervalMs = options.flushIntervalMs ?? FLUSH_INTERVAL_MS;
    this.#slowFlushMs = options.slowFlushMs ?? SLOW_FLUSH_MS;
    this.#maxKeys = Math.max(1, options.maxKeys ?? MAX_KEYS);
    if (options.onFailure) this.#failureListeners.push(options.onFailure);
    if (typeof this.#redis.sbRateLimitFlush !== 'function') {
      this.#redis.defineCommand('sbRateLimitFlush', { lua: RATE_LIMIT_FLUSH });
    }
    this.#sweepTimer = setInterval(() => this.sweep(), options.sweepIntervalMs ?? SWEEP_INTERVAL_MS);
    this.#sweepTimer.unref();
  }

  onFailure(listener: RateLimitFailureListener): void {
    this.#failureListeners.push(listener);
  }

  #failed(reason: 'error' | 'timeout', error?: Error): void {
    for (const listener of this.#failureListeners) listener(reason, error);
  }

  /** Keys currently tracked (for tests and introspection). */
  get size(): number {
    return this.#entries.size;
  }

  incr(key: string, callback: RateLimitCallback, timeWindow: number, _max: number): void {
    const now = Date.now();
    const entry = this.#touch(key, timeWindow, now);
    entry.pending++;
    this.#dirty.add(entry);
    this.#scheduleFlush(this.#flushIntervalMs);
    callback(null, { current: entry.synced + entry.inFlight + entry.pending, ttl: Math.max(0, entry.windowEnd - now) });
  }

  /** The state of `key` without counting a request. */
  read(key: string, callback: RateLimitCallback, _timeWindow?: number, _max?: number): void {
    const now = Date.now();
    const entry = this.#entries.get(this.#namespace + key);
    if (!entry || now >= entry.windowEnd) return callback(null, { current: 0, ttl: 0 });
    callback(null, { current: entry.synced + entry.inFlight + entry.pending, ttl: entry.windowEnd - now });
  }

  /** How `key` stands in this replica: the count read back from Redis, in flight, not sent yet (for tests and debugging). */
  inspect(key: string): { synced: number; inFlight: number; pending: number; ttl: number } | undefined {
    const entry = this.#entries.get(this.#namespace + key);
    if (!entry) return undefined;
    return { synced: entry.synced, inFlight: entry.inFlight, pending: entry.pending, ttl: entry.windowEnd - Date.now() };
  }

  /**
   * The entry for `key`, in its current window, marked most recently used. The most recently
   * used entry is kept at hand: a user's next request (one busy user: every request) needs no
   * key concatenation, map lookup or re-insertion.
   */
  #touch(key: string, timeWindow: number, now: number): Entry {
    let entry = key === this.#mruKey ? this.#mru : undefined;
    if (!entry) {
      const redisKey = this.#namespace + key;
      entry = this.#entries.get(redisKey);
      if (entry) this.#entries.delete(redisKey);
      else {
        entry = { redisKey, windowMs: timeWindow, windowEnd: now + timeWindow, generation: 0, synced: 0, inFlight: 0, pending: 0 };
        if (this.#entries.size >= this.#maxKeys) {
          const oldest = this.#entries.keys().next();
          if (!oldest.done) this.#entries.delete(oldest.value);
        }
      }
      this.#entries.set(redisKey, entry);
      this.#mru = entry;
      this.#mruKey = key;
    }
    if (now >= entry.windowEnd) {
      // A new window: whatever was not sent belongs to the old one, whose key is gone.
      entry.generation++;
      entry.synced = entry.inFlight = entry.pending = 0;
      entry.windowMs = timeWindow;
      entry.windowEnd = now + timeWindow;
      this.#dirty.delete(entry);
    }
    return entry;
  }

  #scheduleFlush(delayMs: number): void {
    if (this.#flushTimer || this.#closed) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      void this.flush();
    }, delayMs);
    this.#flushTimer.unref();
  }

  /**
   * Sends the pending increments now (one script call) and reads the shared counts back.
   * Never rejects. If a call is already in flight, resolves when that one has settled (the
   * increments counted meanwhile go with the next call).
   */
  flush(): Promise<void> {
    if (this.#flushing) return this.#flushing;
    const now = Date.now();
    const batch: Sent[] = [];
    for (const entry of this.#dirty) {
      if (batch.length >= MAX_KEYS_PER_CALL) break;
      this.#dirty.delete(entry);
      // Only the current window is worth sending (an ended one would be counted in the next).
      if (entry.pending === 0 || now >= entry.windowEnd) continue;
      batch.push({ entry, generation: entry.generation, n: entry.pending });
      entry.inFlight += entry.pending;
      entry.pending = 0;
    }
    if (batch.length === 0) return Promise.resolve();

    let reported = false;
    const slow = setTimeout(() => {
      reported = true;
      this.#failed('timeout');
    }, this.#slowFlushMs);
    slow.unref();

    const call = (async () => {
      try {
        // Whole ms for PEXPIRE (ttl.ts); a nonsense window fails this call like a Redis error would.
        const args: (string | number)[] = batch.map((s) => s.entry.redisKey);
        for (const s of batch) args.push(s.n, wholeMs(s.entry.windowMs, 'rate-limit window'));
        return await this.#redis.sbRateLimitFlush(batch.length, ...args);
      } catch (error) {
        return error instanceof Error ? error : new Error(String(error));
      }
    })();
    this.#flushing = call.then((reply) => {
      clearTimeout(slow);
      if (reply instanceof Error || !Array.isArray(reply)) {
        // Keep counting them here and send them again with the next flush.
        for (const s of batch) {
          if (s.entry.generation !== s.generation) continue;
          s.entry.inFlight -= s.n;
          s.entry.pending += s.n;
          this.#dirty.add(s.entry);
        }
        if (!reported) this.#failed('error', reply instanceof Error ? reply : new Error('unexpected rate-limit flush reply'));
      } else {
        const at = Date.now();
        batch.forEach((s, i) => {
          if (s.entry.generation !== s.generation) return;
          s.entry.inFlight -= s.n;
          s.entry.synced = Number(reply[2 * i]);
          s.entry.windowEnd = at + Math.max(0, Number(reply[2 * i + 1]));
        });
      }
      this.#flushing = undefined;
      // More keys than one call takes: go on at once; otherwise wait for the next interval.
      if (this.#dirty.size > 0) this.#scheduleFlush(batch.length >= MAX_KEYS_PER_CALL ? 0 : this.#flushIntervalMs);
    });
    return this.#flushing;
  }

  /** Drops the keys whose window has ended (nobody asked since) and nothing is in flight for. */
  sweep(now = Date.now()): void {
    for (const [redisKey, entry] of this.#entries) {
      if (now >= entry.windowEnd && entry.inFlight === 0) {
        this.#entries.delete(redisKey);
        this.#dirty.delete(entry);
        if (entry === this.#mru) this.#mru = this.#mruKey = undefined;
      }
    }
  }

  /**
   * Stops the timers and makes one last attempt, bounded by the slow-flush time, to send the
   * pending increments (skipped when the Redis client is no longer connected). Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#sweepTimer);
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    if (this.#redis.status !== 'ready') return;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#slowFlushMs);
      timer.unref();
    });
    try {
      // Once for what is pending now, once more if a call was in flight when asked.
      await Promise.race([this.flush().then(() => this.flush()), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }
}
