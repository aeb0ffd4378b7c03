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
 */
import calculateSlot from 'cluster-key-slot';
import type { RedisOptions } from 'ioredis';
import { AppendBatcher } from './append-batcher.js';
import { connectRedis, isCluster, keepSocketQuiet, silenceConnectionErrors, type RedisClient, type RedisEndpoint, type RedisMode } from './redis-connection.js';
import { RedisKeys } from './redis-keys.js';
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

interface ScriptCommands {
  sbDeleteIf(key: string, expected: string): Promise<number>;
  sbAppendEvents(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
  sbCreateSession(key: string, index: string, inUse: string, record: string, ttlMs: number, sessionId: string, maxPerUser: number): Promise<string[]>;
  sbTouchSession(key: string, index: string, ttlMs: number, sessionId: string): Promise<string | null>;
  sbDeleteSession(key: string, index: string, inUse: string, sessionId: string): Promise<number>;
  sbMarkSessionsInUse(index: string, inUse: string, leaseMs: number, ...sessionIds: string[]): Promise<number>;
  sbReleaseSessionInUse(index: string, inUse: string, sessionId: string): Promise<number>;
}

type ScriptedRedis = RedisClient & ScriptCommands;

export interface RedisStoreOptions extends RedisEndpoint {
  keyPrefix: string;
  /** Extra ioredis options (tests shorten timeouts). */
  redisOptions?: RedisOptions;
  /** How long a session count is reused (default 15 s; every replica's scrape asks). */
  sessionCountCacheMs?: number;
  /** `streams.replayBytes` and `streams.replayBytesPerUser`. */
  replayBudget?: ReplayBudget;
}

export class RedisStore implements StateStore {
  readonly kind = 'redis' as const;
  readonly mode: RedisMode;
  readonly redis: ScriptedRedis;
  readonly keyPrefix: string;
  readonly keys: RedisKeys;
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
    const cluster = isCluster(this.redis);
    this.keys = new RedisKeys(cluster);
    this.#appends = new AppendBatcher<RedisAppend>(
      (items) => {
        const args: (string | number)[] = items.flatMap((item) => item.keys);
        const { maxBytes, maxBytesPerUser } = this.#budget;
        for (const item of items) args.push(item.field, item.maxEvents, maxBytes, maxBytesPerUser, item.ttlMs, item.channel, item.entries.length, ...item.entries);
        return this.redis.sbAppendEvents(items.length * 3, ...args);
      },
      // One script call touches one slot in a cluster; the user's tag decides it.
      cluster ? (item) => calculateSlot(item.keys[0]) : undefined,
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

  /**
   * Resolves once connected (startup waits for it so the first request does not fail). A
   * cluster is ready when it knows its slots; its masters' connections are waited for too,
   * or the first requests would be refused while they are being made (redis-connection.ts).
   */
  async ready(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await this.#connected(timeoutMs);
    if (!isCluster(this.redis)) return;
    let timer: NodeJS.Timeout | undefined;
    const masters = Promise.allSettled(this.redis.nodes('master').map((node) => node.ping()));
    await Promise.race([masters, new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]).finally(() => clearTimeout(timer));
  }

  async #connected(timeoutMs: number): Promise<void> {
    if (this.redis.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`Redis not reachable within ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        cleanup();
        resolve();
      };
      const cleanup = () => {
        clearTimeout(timer);
        this.redis.off('ready', onReady);
      };
      this.redis.on('ready', onReady);
    });
  }

  async createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number, maxPerUser?: number): Promise<EvictedSession[]> {
    const { keys } = this;
    const flat = await this.redis.sbCreateSession(keys.session(userKey, sessionId), keys.sessionIndex(userKey), keys.sessionsInUse(userKey), JSON.stringify(record), wholeMs(ttlMs, 'createSession'), sessionId, maxPerUser ?? 0);
    const evicted: EvictedSession[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) evicted.push({ sessionId: flat[i]!, record: JSON.parse(flat[i + 1]!) as SessionRecord });
    return evicted;
  }

  async replaceSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.session(userKey, sessionId), JSON.stringify(record), 'PX', wholeMs(ttlMs, 'replaceSession'), 'XX')) === 'OK';
  }

  async touchSession(userKey: string, sessionId: string, ttlMs: number): Promise<SessionRecord | undefined> {
    const text = await this.redis.sbTouchSession(this.keys.session(userKey, sessionId), this.keys.sessionIndex(userKey), wholeMs(ttlMs, 'touchSession'), sessionId);
    return text ? (JSON.parse(text) as SessionRecord) : undefined;
  }

  async deleteSession(userKey: string, sessionId: string): Promise<boolean> {
    return (await this.redis.sbDeleteSession(this.keys.session(userKey, sessionId), this.keys.sessionIndex(userKey), this.keys.sessionsInUse(userKey), sessionId)) > 0;
  }

  async markSessionsInUse(userKey: string, sessionIds: readonly string[], leaseMs: number): Promise<void> {
    const lease = wholeMs(leaseMs, 'markSessionsInUse');
    if (!sessionIds.length) return;
    await this.redis.sbMarkSessionsInUse(this.keys.sessionIndex(userKey), this.keys.sessionsInUse(userKey), lease, ...sessionIds);
  }

  async releaseSessionInUse(userKey: string, sessionId: string): Promise<void> {
    await this.redis.sbReleaseSessionInUse(this.keys.sessionIndex(userKey), this.keys.sessionsInUse(userKey), sessionId);
  }

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

  async readEvents(key: StreamKey): Promise<StoredEvent[]> {
    const entries = await this.redis.lrange(this.keys.stream(key), 0, -1);
    return entries.map((e) => JSON.parse(e) as StoredEvent);
  }

  /** `ttlMs` rounded up to whole ms (ttl.ts); undefined keeps the value without expiry. */
  async putValue(key: string, value: string, ttlMs?: number): Promise<void> {
    if (ttlMs === undefined) await this.redis.set(this.keys.value(key), value);
    else await this.redis.set(this.keys.value(key), value, 'PX', wholeMs(ttlMs, 'putValue'));
  }

  async getValue(key: string): Promise<string | undefined> {
    return (await this.redis.get(this.keys.value(key))) ?? undefined;
  }

  async takeValue(key: string): Promise<string | undefined> {
    return (await this.redis.getdel(this.keys.value(key))) ?? undefined;
  }

  /** `ttlMs` rounded up to whole ms (ttl.ts). */
  async putValueIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.value(key), value, 'PX', wholeMs(ttlMs, 'putValueIfAbsent'), 'NX')) === 'OK';
  }

  async deleteValueIf(key: string, expected: string): Promise<boolean> {
    return (await this.redis.sbDeleteIf(this.keys.value(key), expected)) === 1;
  }

  async deleteValue(key: string): Promise<boolean> {
    return (await this.redis.del(this.keys.value(key))) > 0;
  }

  async putFieldIfAbsent(key: string, field: string, value: string): Promise<boolean> {
    return (await this.redis.hsetnx(this.keys.fields(key), field, value)) === 1;
  }

  async putField(key: string, field: string, value: string): Promise<void> {
    await this.redis.hset(this.keys.fields(key), field, value);
  }

  async getFields(key: string): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys.fields(key));
  }

  async deleteField(key: string, field: string): Promise<boolean> {
    return (await this.redis.hdel(this.keys.fields(key), field)) > 0;
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
