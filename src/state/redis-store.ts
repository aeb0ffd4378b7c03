/**
 * Redis implementation of the state contract. Each operation is one round trip: session
 * reads slide the idle TTL (GETEX, in a script that also records the use in the user's
 * session index and keeps it alive), and creating a session (with the per-user cap) or appending to a replay log (push,
 * trim by count and bytes, expire) is one Lua script (redis-scripts.ts) so that nothing is
 * left unbounded or without a TTL; the appends of all streams in one turn of the event loop
 * share that script call (append-batcher.ts) — in a cluster, the appends of one hash slot.
 *
 * Keys (under the configured prefix; redis-keys.ts, where the user part is a hash tag in
 * cluster mode): `s:<user>:<session>`, `si:<user>` (the user's sessions by last use),
 * `su:<user>` (those marked in use, until when), `e:<user>:<session>:<stream>`, `eb:<user>` (sizes of the user's logs) and `eo:<user>` (the
 * user's logs by last append). Standalone, cluster or sentinel: redis-connection.ts.
 *
 * Every TTL is passed through ttl.ts's wholeMs before it is sent (rounded up to whole
 * milliseconds; NaN, Infinity, 0 and negatives refused): Redis takes nothing else.
 *
 * A Redis blip waits up to `redis.unavailableWait` and is sent again where safe
 * (store-waits.ts; the calls: redis-calls.ts): each operation says whether it is
 * `idempotent` or `unsent-only`, and why. `ping` (readiness) and `countSessions` never wait.
 */
import calculateSlot from 'cluster-key-slot';
import type { RedisOptions } from 'ioredis';
import { AppendBatcher } from './append-batcher.js';
import { connectRedis, isCluster, keepSocketQuiet, silenceConnectionErrors, whenConnected, type RedisEndpoint, type RedisMode } from './redis-connection.js';
import { storeCalls as calls, type ScriptedRedis } from './redis-calls.js';
import { RedisKeys } from './redis-keys.js';
import { StoreWaits } from './store-waits.js';
import { wholeMs } from './ttl.js';
import { appendEventsScript, CREATE_SESSION, DELETE_IF, DELETE_SESSION, MARK_SESSIONS_IN_USE, RELEASE_SESSION_IN_USE, TOUCH_SESSION } from './redis-scripts.js';
import { DEFAULT_REPLAY_BUDGET, type EvictedSession, type ReplayBudget, type ReplayLimits, type SessionRecord, type StateStore, type StoredEvent, type StreamKey } from './store.js';

/** One stream's share of an append script call. */
interface RedisAppend {
  keys: [log: string, sizes: string, order: string];
  field: string;
  channel: string;
  maxEvents: number;
  ttlMs: number;
  entries: string[];
}

const SESSION_COUNT_TTL_MS = 15_000;
const MAX_SCAN_ROUNDS = 1_000;

export interface RedisStoreOptions extends RedisEndpoint {
  keyPrefix: string;
  /** Extra ioredis options (tests shorten timeouts). */
  redisOptions?: RedisOptions;
  /** How long a session count is reused (default 15 s; every replica's scrape asks). */
  sessionCountCacheMs?: number;
  /** `streams.replayBytes` and `streams.replayBytesPerUser`. */
  replayBudget?: ReplayBudget;
  /** `redis.unavailableWait` in ms (store-waits.ts); default 0, fail at once (create-state.ts passes the config's, 5 s). */
  unavailableWaitMs?: number;
  /** Operations that may wait at once (default store-waits.ts DEFAULT_MAX_HELD); more are refused at once. */
  maxWaiting?: number;
}

export class RedisStore implements StateStore {
  readonly kind = 'redis' as const;
  readonly mode: RedisMode;
  readonly redis: ScriptedRedis;
  readonly keyPrefix: string;
  readonly keys: RedisKeys;
  /** Waiting out a blip; the coordinator on the same connection shares it (create-state.ts). */
  readonly waits: StoreWaits;
  readonly #sessionCountCacheMs: number;
  #sessionCount: { value: number; at: number } | undefined;
  readonly #budget: ReplayBudget;
  readonly #appends: AppendBatcher<RedisAppend>;

  constructor(options: RedisStoreOptions) {
    this.mode = options.mode ?? 'standalone';
    this.keyPrefix = options.keyPrefix;
    this.#budget = options.replayBudget ?? DEFAULT_REPLAY_BUDGET;
    this.#sessionCountCacheMs = options.sessionCountCacheMs ?? SESSION_COUNT_TTL_MS;
    this.redis = connectRedis(options, options.keyPrefix, options.redisOptions) as ScriptedRedis;
    this.waits = new StoreWaits(this.redis, { waitMs: options.unavailableWaitMs ?? 0, maxHeld: options.maxWaiting });
    const cluster = isCluster(this.redis);
    this.keys = new RedisKeys(cluster);
    const append = (items: RedisAppend[]) => {
      const args: (string | number)[] = items.flatMap((item) => item.keys);
      const { maxBytes, maxBytesPerUser } = this.#budget;
      for (const item of items) args.push(item.field, item.maxEvents, maxBytes, maxBytesPerUser, item.ttlMs, item.channel, item.entries.length, ...item.entries);
      return calls.appendEvents(this.redis, items.length * 3, args);
    };
    this.#appends = new AppendBatcher<RedisAppend>(
      append,
      // One script call touches one slot in a cluster; the user's tag decides it.
      cluster ? (item) => calculateSlot(item.keys[0]) : undefined,
      // Idempotent: the script skips an append that already ran (redis-scripts.ts).
      (err, items) => this.waits.again(err, 'idempotent', append, items),
    );
    this.redis.defineCommand('sbAppendEvents', { lua: appendEventsScript(cluster ? 'SPUBLISH' : 'PUBLISH') });
    this.redis.defineCommand('sbDeleteIf', { numberOfKeys: 1, lua: DELETE_IF });
    this.redis.defineCommand('sbCreateSession', { numberOfKeys: 3, lua: CREATE_SESSION });
    this.redis.defineCommand('sbTouchSession', { numberOfKeys: 2, lua: TOUCH_SESSION });
    this.redis.defineCommand('sbDeleteSession', { numberOfKeys: 3, lua: DELETE_SESSION });
    this.redis.defineCommand('sbMarkSessionsInUse', { numberOfKeys: 2, lua: MARK_SESSIONS_IN_USE });
    this.redis.defineCommand('sbReleaseSessionInUse', { numberOfKeys: 2, lua: RELEASE_SESSION_IN_USE });
    silenceConnectionErrors(this.redis);
  }

  /** Resolves once connected, a cluster's masters too (startup waits for it: redis-connection.ts whenConnected). */
  async ready(timeoutMs = 10_000): Promise<void> {
    await whenConnected(this.redis, timeoutMs);
  }

  /**
   * Idempotent: the id is new, so a second run writes the same record under the same key,
   * stamps the same use again and evicts nothing more (the cap already holds). What a first
   * run that landed unseen evicted is not reported: those sessions are gone from Redis, and
   * what hung off them ends when it next asks the store.
   */
  async createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number, maxPerUser?: number): Promise<EvictedSession[]> {
    const { keys } = this;
    const key = keys.session(userKey, sessionId);
    const index = keys.sessionIndex(userKey);
    const inUse = keys.sessionsInUse(userKey);
    const text = JSON.stringify(record);
    const ttl = wholeMs(ttlMs, 'createSession');
    const cap = maxPerUser ?? 0;
    let flat: string[];
    try {
      flat = await calls.createSession(this.redis, key, index, inUse, text, ttl, sessionId, cap);
    } catch (err) {
      flat = await this.waits.again(err, 'idempotent', calls.createSession, this.redis, key, index, inUse, text, ttl, sessionId, cap);
    }
    const evicted: EvictedSession[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) evicted.push({ sessionId: flat[i]!, record: JSON.parse(flat[i + 1]!) as SessionRecord });
    return evicted;
  }

  /** Idempotent: SET XX with the same record and TTL; a second run replaces nothing but the first run's copy. */
  async replaceSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<boolean> {
    const key = this.keys.session(userKey, sessionId);
    const text = JSON.stringify(record);
    const ttl = wholeMs(ttlMs, 'replaceSession');
    try {
      return (await calls.replace(this.redis, key, text, ttl)) === 'OK';
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.replace, this.redis, key, text, ttl)) === 'OK';
    }
  }

  /** Idempotent: a read that slides the TTL again and stamps the same use again. */
  async touchSession(userKey: string, sessionId: string, ttlMs: number): Promise<SessionRecord | undefined> {
    const key = this.keys.session(userKey, sessionId);
    const index = this.keys.sessionIndex(userKey);
    const ttl = wholeMs(ttlMs, 'touchSession');
    let text: string | null;
    try {
      text = await calls.touchSession(this.redis, key, index, ttl, sessionId);
    } catch (err) {
      text = await this.waits.again(err, 'idempotent', calls.touchSession, this.redis, key, index, ttl, sessionId);
    }
    return text ? (JSON.parse(text) as SessionRecord) : undefined;
  }

  /** Idempotent (ZREM, ZREM, DEL); after a first run that landed unseen, the answer is false. */
  async deleteSession(userKey: string, sessionId: string): Promise<boolean> {
    const key = this.keys.session(userKey, sessionId);
    const index = this.keys.sessionIndex(userKey);
    const inUse = this.keys.sessionsInUse(userKey);
    try {
      return (await calls.deleteSession(this.redis, key, index, inUse, sessionId)) > 0;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.deleteSession, this.redis, key, index, inUse, sessionId)) > 0;
    }
  }

  /** Idempotent: ZADD GT of a lease until about the same time, and a use stamped again. */
  async markSessionsInUse(userKey: string, sessionIds: readonly string[], leaseMs: number): Promise<void> {
    const lease = wholeMs(leaseMs, 'markSessionsInUse');
    if (!sessionIds.length) return;
    const index = this.keys.sessionIndex(userKey);
    const inUse = this.keys.sessionsInUse(userKey);
    try {
      await calls.markInUse(this.redis, index, inUse, lease, sessionIds);
    } catch (err) {
      await this.waits.again(err, 'idempotent', calls.markInUse, this.redis, index, inUse, lease, sessionIds);
    }
  }

  /** Idempotent: ZREM of the mark, and a use stamped again. */
  async releaseSessionInUse(userKey: string, sessionId: string): Promise<void> {
    const index = this.keys.sessionIndex(userKey);
    const inUse = this.keys.sessionsInUse(userKey);
    try {
      await calls.releaseInUse(this.redis, index, inUse, sessionId);
    } catch (err) {
      await this.waits.again(err, 'idempotent', calls.releaseInUse, this.redis, index, inUse, sessionId);
    }
  }

  /**
   * Idempotent (the batched script call, see the constructor): an append whose newest entry
   * is already the log's newest ran before, and is not pushed or published again.
   */
  async appendEvents(key: StreamKey, events: readonly StoredEvent[], limits: ReplayLimits): Promise<void> {
    // Checked here, not in the batched call: one bad TTL must not fail the other streams' appends.
    const ttlMs = wholeMs(limits.ttlMs, 'appendEvents');
    if (!events.length) return;
    await this.#appends.append({
      keys: [this.keys.stream(key), this.keys.streamSizes(key.userKey), this.keys.streamOrder(key.userKey)],
      field: `${key.sessionId}:${key.streamId}`,
      channel: this.keys.streamChannel(this.keyPrefix, key),
      maxEvents: limits.maxEvents,
      ttlMs,
      entries: events.map(serializeEvent),
    });
  }

  /** Idempotent: LRANGE. */
  async readEvents(key: StreamKey): Promise<StoredEvent[]> {
    const name = this.keys.stream(key);
    let entries: string[];
    try {
      entries = await calls.readLog(this.redis, name);
    } catch (err) {
      entries = await this.waits.again(err, 'idempotent', calls.readLog, this.redis, name);
    }
    return entries.map((e) => JSON.parse(e) as StoredEvent);
  }

  /** `ttlMs` rounded up to whole ms (ttl.ts); undefined keeps the value without expiry. Idempotent: SET of the same value and TTL. */
  async putValue(key: string, value: string, ttlMs?: number): Promise<void> {
    const name = this.keys.value(key);
    const ttl = ttlMs === undefined ? undefined : wholeMs(ttlMs, 'putValue');
    try {
      await calls.put(this.redis, name, value, ttl);
    } catch (err) {
      await this.waits.again(err, 'idempotent', calls.put, this.redis, name, value, ttl);
    }
  }

  /** Idempotent: GET. */
  async getValue(key: string): Promise<string | undefined> {
    const name = this.keys.value(key);
    try {
      return (await calls.get(this.redis, name)) ?? undefined;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.get, this.redis, name)) ?? undefined;
    }
  }

  /**
   * Idempotent as to what is stored (GETDEL deletes nothing more the second time), and
   * never returns a value twice: after a first run that took the value unseen, the answer
   * is undefined — the single-use value is spent, as it would be after a 503.
   */
  async takeValue(key: string): Promise<string | undefined> {
    const name = this.keys.value(key);
    try {
      return (await calls.take(this.redis, name)) ?? undefined;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.take, this.redis, name)) ?? undefined;
    }
  }

  /**
   * `ttlMs` rounded up to whole ms (ttl.ts). Unsent-only: after a SET NX that landed unseen,
   * a second run would answer false — "another holds it" — for the caller's own lock or
   * claim, which would then wait for itself until the TTL ends.
   */
  async putValueIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const name = this.keys.value(key);
    const ttl = wholeMs(ttlMs, 'putValueIfAbsent');
    try {
      return (await calls.putIfAbsent(this.redis, name, value, ttl)) === 'OK';
    } catch (err) {
      return (await this.waits.again(err, 'unsent-only', calls.putIfAbsent, this.redis, name, value, ttl)) === 'OK';
    }
  }

  /**
   * Idempotent (compare-and-delete): a second run finds the value gone and deletes nothing.
   * After a first run that landed unseen it answers false, so a caller consuming a
   * single-use value is refused rather than told twice that it won.
   */
  async deleteValueIf(key: string, expected: string): Promise<boolean> {
    const name = this.keys.value(key);
    try {
      return (await calls.deleteIf(this.redis, name, expected)) === 1;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.deleteIf, this.redis, name, expected)) === 1;
    }
  }

  /** Idempotent: DEL; after a first run that landed unseen, the answer is false. */
  async deleteValue(key: string): Promise<boolean> {
    const name = this.keys.value(key);
    try {
      return (await calls.del(this.redis, name)) > 0;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.del, this.redis, name)) > 0;
    }
  }

  /**
   * Idempotent: HSETNX changes nothing once the field exists. After a first run that landed
   * unseen it answers false, and the field holds the caller's own value (the pinning code
   * then reads it back and finds its own definition).
   */
  async putFieldIfAbsent(key: string, field: string, value: string): Promise<boolean> {
    const name = this.keys.fields(key);
    try {
      return (await calls.putFieldIfAbsent(this.redis, name, field, value)) === 1;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.putFieldIfAbsent, this.redis, name, field, value)) === 1;
    }
  }

  /** Idempotent: HSET of the same value. */
  async putField(key: string, field: string, value: string): Promise<void> {
    const name = this.keys.fields(key);
    try {
      await calls.putField(this.redis, name, field, value);
    } catch (err) {
      await this.waits.again(err, 'idempotent', calls.putField, this.redis, name, field, value);
    }
  }

  /** Idempotent: HGETALL. */
  async getFields(key: string): Promise<Record<string, string>> {
    const name = this.keys.fields(key);
    try {
      return await calls.getFields(this.redis, name);
    } catch (err) {
      return this.waits.again(err, 'idempotent', calls.getFields, this.redis, name);
    }
  }

  /** Idempotent: HDEL; after a first run that landed unseen, the answer is false. */
  async deleteField(key: string, field: string): Promise<boolean> {
    const name = this.keys.fields(key);
    try {
      return (await calls.deleteField(this.redis, name, field)) > 0;
    } catch (err) {
      return (await this.waits.again(err, 'idempotent', calls.deleteField, this.redis, name, field)) > 0;
    }
  }

  /**
   * Counts session keys with SCAN (never KEYS, which blocks Redis). Scrapes come from every
   * replica, so the result is cached for a while and the scan is bounded.
   */
  async countSessions(): Promise<number> {
    const now = Date.now();
    if (this.#sessionCount && now - this.#sessionCount.at < this.#sessionCountCacheMs) return this.#sessionCount.value;
    // A cluster's keys are spread over its masters: each one is scanned.
    const nodes = isCluster(this.redis) ? this.redis.nodes('master') : [this.redis];
    let count = 0;
    for (const node of nodes) {
      let cursor = '0';
      let rounds = 0;
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', this.keys.sessionPattern(this.keyPrefix), 'COUNT', 1000);
        cursor = next;
        count += keys.length;
      } while (cursor !== '0' && ++rounds < MAX_SCAN_ROUNDS);
    }
    this.#sessionCount = { value: count, at: now };
    return count;
  }

  /**
   * Readiness. A cluster is asked for its state: while a lost master's slots wait for a
   * replica to be promoted, `cluster_state` is `fail` and requests for those slots fail too.
   */
  async ping(): Promise<void> {
    if (!isCluster(this.redis)) {
      await this.redis.ping();
      return;
    }
    const info = String(await this.redis.cluster('INFO'));
    const state = /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
    if (state !== 'ok') throw new Error(`cluster_state is ${state}`);
  }

  /** For /readyz: the mode and the client's connection status (ioredis: ready, connecting, reconnecting, …). */
  describe(): string {
    return `redis ${this.mode}, connection ${this.redis.status}`;
  }

  async close(): Promise<void> {
    this.waits.close();
    keepSocketQuiet(this.redis);
    this.redis.disconnect();
  }
}

/** An entry's JSON; a meta entry starts `{"seq":…,"meta":`, which the append script recognises. */
function serializeEvent(event: StoredEvent): string {
  if (!event.meta) return JSON.stringify(event);
  const { seq, meta, ...rest } = event;
  return JSON.stringify({ seq, meta, ...rest });
}
