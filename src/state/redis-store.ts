/**
 * Redis implementation of the state contract. Each operation is one round trip: session
 * reads slide the idle TTL with GETEX, and appending to a replay log (push, trim, expire)
 * is one Lua script so that a log is never left unbounded or without a TTL; the appends of
 * all streams in one turn of the event loop share that script call (append-batcher.ts).
 *
 * Keys (under the configured prefix): `s:<user>:<session>` and `e:<user>:<session>:<stream>`.
 */
import { Redis, type RedisOptions } from 'ioredis';
import { AppendBatcher } from './append-batcher.js';
import { streamChannel } from './redis-coordinator.js';
import type { ReplayLimits, SessionRecord, StateStore, StoredEvent, StreamKey } from './store.js';

// For each stream (KEYS[i]; in ARGV: max events, TTL ms, channel, entry count, entries):
// appends, bounds and expires the log, and publishes the new entries for a replica that
// follows the stream from elsewhere (RedisCoordinator.watchStream). Several streams' appends
// go in one call (append-batcher.ts).
const APPEND_EVENTS = `
local a = 1
for _, key in ipairs(KEYS) do
  local first = a + 4
  local last = a + 3 + tonumber(ARGV[a + 3])
  -- unpack() is limited to a few thousand values: push in slices.
  for i = first, last, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, last)))
  end
  redis.call('LTRIM', key, -tonumber(ARGV[a]), -1)
  redis.call('PEXPIRE', key, ARGV[a + 1])
  redis.call('PUBLISH', ARGV[a + 2], '[' .. table.concat(ARGV, ',', first, last) .. ']')
  a = last + 1
end
return #KEYS`;

const DELETE_IF = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

const SESSION_COUNT_TTL_MS = 15_000;
const MAX_SCAN_ROUNDS = 1_000;

interface ScriptedRedis extends Redis {
  sbDeleteIf(key: string, expected: string): Promise<number>;
  sbAppendEvents(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
}

export interface RedisStoreOptions {
  url: string;
  keyPrefix: string;
  /** Extra ioredis options (tests shorten timeouts). */
  redisOptions?: RedisOptions;
  /** How long a session count is reused (default 15 s; every replica's scrape asks). */
  sessionCountCacheMs?: number;
}

export class RedisStore implements StateStore {
  readonly kind = 'redis' as const;
  readonly redis: ScriptedRedis;
  readonly keyPrefix: string;
  readonly #sessionCountCacheMs: number;
  #sessionCount: { value: number; at: number } | undefined;
  readonly #appends = new AppendBatcher((items) => {
    const args: (string | number)[] = items.map((item) => item.key);
    for (const item of items) args.push(item.maxEvents, item.ttlMs, item.channel, item.entries.length, ...item.entries);
    return this.redis.sbAppendEvents(items.length, ...args);
  });

  constructor(options: RedisStoreOptions) {
    this.keyPrefix = options.keyPrefix;
    this.#sessionCountCacheMs = options.sessionCountCacheMs ?? SESSION_COUNT_TTL_MS;
    this.redis = new Redis(options.url, {
      keyPrefix: options.keyPrefix,
      // Fail fast while Redis is away instead of queueing requests without bound: callers
      // turn the error into a 503 and the client retries.
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      connectTimeout: 5_000,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
      lazyConnect: false,
      ...options.redisOptions,
    }) as ScriptedRedis;
    this.redis.defineCommand('sbAppendEvents', { lua: APPEND_EVENTS });
    this.redis.defineCommand('sbDeleteIf', { numberOfKeys: 1, lua: DELETE_IF });
    // Connection errors surface through the commands that fail; without a listener ioredis
    // would print them as unhandled.
    this.redis.on('error', () => {});
  }

  /** Resolves once connected (startup waits for it so the first request does not fail). */
  async ready(timeoutMs = 10_000): Promise<void> {
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

  async createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<void> {
    await this.redis.set(sessionKey(userKey, sessionId), JSON.stringify(record), 'PX', ttlMs);
  }

  async replaceSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(sessionKey(userKey, sessionId), JSON.stringify(record), 'PX', ttlMs, 'XX')) === 'OK';
  }

  async touchSession(userKey: string, sessionId: string, ttlMs: number): Promise<SessionRecord | undefined> {
    const text = await this.redis.getex(sessionKey(userKey, sessionId), 'PX', ttlMs);
    return text ? (JSON.parse(text) as SessionRecord) : undefined;
  }

  async deleteSession(userKey: string, sessionId: string): Promise<boolean> {
    return (await this.redis.del(sessionKey(userKey, sessionId))) > 0;
  }

  async appendEvents(key: StreamKey, events: readonly StoredEvent[], limits: ReplayLimits): Promise<void> {
    if (!events.length) return;
    await this.#appends.append({
      key: streamKey(key),
      channel: streamChannel(this.keyPrefix, key),
      maxEvents: limits.maxEvents,
      ttlMs: limits.ttlMs,
      entries: events.map((e) => JSON.stringify(e)),
    });
  }

  async readEvents(key: StreamKey): Promise<StoredEvent[]> {
    const entries = await this.redis.lrange(streamKey(key), 0, -1);
    return entries.map((e) => JSON.parse(e) as StoredEvent);
  }

  async putValue(key: string, value: string, ttlMs?: number): Promise<void> {
    if (ttlMs === undefined) await this.redis.set(valueKey(key), value);
    else await this.redis.set(valueKey(key), value, 'PX', ttlMs);
  }

  async getValue(key: string): Promise<string | undefined> {
    return (await this.redis.get(valueKey(key))) ?? undefined;
  }

  async takeValue(key: string): Promise<string | undefined> {
    return (await this.redis.getdel(valueKey(key))) ?? undefined;
  }

  async putValueIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(valueKey(key), value, 'PX', ttlMs, 'NX')) === 'OK';
  }

  async deleteValueIf(key: string, expected: string): Promise<boolean> {
    return (await this.redis.sbDeleteIf(valueKey(key), expected)) === 1;
  }

  async deleteValue(key: string): Promise<boolean> {
    return (await this.redis.del(valueKey(key))) > 0;
  }

  /**
   * Counts session keys with SCAN (never KEYS, which blocks Redis). Scrapes come from every
   * replica, so the result is cached for a while and the scan is bounded.
   */
  async countSessions(): Promise<number> {
    const now = Date.now();
    if (this.#sessionCount && now - this.#sessionCount.at < this.#sessionCountCacheMs) return this.#sessionCount.value;
    let cursor = '0';
    let count = 0;
    let rounds = 0;
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.keyPrefix}s:*`, 'COUNT', 1000);
      cursor = next;
      count += keys.length;
    } while (cursor !== '0' && ++rounds < MAX_SCAN_ROUNDS);
    this.#sessionCount = { value: count, at: now };
    return count;
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

const sessionKey = (userKey: string, sessionId: string) => `s:${userKey}:${sessionId}`;
const valueKey = (key: string) => `v:${key}`;
const streamKey = (k: StreamKey) => `e:${k.userKey}:${k.sessionId}:${k.streamId}`;
