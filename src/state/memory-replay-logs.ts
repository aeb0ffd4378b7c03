/**
 * The replay logs of the in-process store (memory-store.ts), bounded the way the Redis append
 * script bounds them (redis-scripts.ts), so that one contract test holds for both
 * (test/state/store-contract.test.ts):
 *
 * - per stream, at most `maxEvents` events and {@link ReplayBudget.maxBytes} bytes of
 *   serialized entries, the oldest going first — but the meta entry (what the stream is for)
 *   and the newest entry (its last sequence number) always stay, so it can still be resumed;
 * - per user, at most {@link ReplayBudget.maxBytesPerUser} over all streams: the user's
 *   least recently appended streams are dropped whole first (issue 13: 20 echo calls of
 *   2 MiB kept 50 MiB for 10 minutes).
 *
 * Sizes are the UTF-8 bytes of each entry's JSON, which is what Redis stores.
 */
import { isDeepStrictEqual } from 'node:util';
import type { ReplayBudget, ReplayLimits, StoredEvent, StreamKey } from './store.js';

interface Log {
  events: StoredEvent[];
  /** Serialized size of each entry, in step with `events`. */
  sizes: number[];
  bytes: number;
  expiresAt: number;
}

interface UserLogs {
  bytes: number;
  /** The user's logs, least recently appended first (Map order). */
  logs: Map<string, Log>;
}

export class MemoryReplayLogs {
  readonly #logs = new Map<string, Log>();
  readonly #users = new Map<string, UserLogs>();

  constructor(private readonly budget: ReplayBudget) {}

  append(key: StreamKey, events: readonly StoredEvent[], limits: ReplayLimits): void {
    const id = logId(key);
    const log = this.#live(id, key.userKey) ?? { events: [], sizes: [], bytes: 0, expiresAt: 0 };
    // An append whose newest entry is the log's newest already ran: not again (the Redis
    // store's rule, for an append sent again after its answer was lost; redis-scripts.ts).
    const newest = log.events.at(-1);
    if (newest && isDeepStrictEqual(newest, events.at(-1))) return;
    const user = this.#users.get(key.userKey) ?? { bytes: 0, logs: new Map<string, Log>() };
    this.#users.set(key.userKey, user);
    const before = log.bytes;
    for (const event of events) {
      const size = Buffer.byteLength(JSON.stringify(event));
      log.events.push(structuredClone(event));
      log.sizes.push(size);
      log.bytes += size;
    }
    trim(log, limits.maxEvents, this.budget.maxBytes);
    log.expiresAt = Date.now() + limits.ttlMs;
    this.#logs.set(id, log);
    user.logs.delete(id);
    user.logs.set(id, log);
    user.bytes += log.bytes - before;
    for (const [otherId, other] of user.logs) {
      if (user.bytes <= this.budget.maxBytesPerUser || otherId === id) break;
      this.#drop(otherId, key.userKey, other);
    }
  }

  read(key: StreamKey): StoredEvent[] {
    return structuredClone(this.#live(logId(key), key.userKey)?.events ?? []);
  }

  sweep(now: number): void {
    for (const [userKey, user] of this.#users) {
      for (const [id, log] of user.logs) if (log.expiresAt <= now) this.#drop(id, userKey, log);
    }
  }

  clear(): void {
    this.#logs.clear();
    this.#users.clear();
  }

  #live(id: string, userKey: string): Log | undefined {
    const log = this.#logs.get(id);
    if (log && log.expiresAt <= Date.now()) {
      this.#drop(id, userKey, log);
      return undefined;
    }
    return log;
  }

  #drop(id: string, userKey: string, log: Log): void {
    this.#logs.delete(id);
    const user = this.#users.get(userKey);
    if (!user?.logs.delete(id)) return;
    user.bytes -= log.bytes;
    if (user.logs.size === 0) this.#users.delete(userKey);
  }
}

/** Drops the oldest entries after the meta entry while over either bound, keeping the newest. */
function trim(log: Log, maxEvents: number, maxBytes: number): void {
  const from = log.events[0]?.meta ? 1 : 0;
  let data = log.events.length - from;
  let count = Math.max(0, data - maxEvents);
  let bytes = log.bytes;
  for (let i = 0; i < count; i++) bytes -= log.sizes[from + i]!;
  data -= count;
  while (bytes > maxBytes && data > 1) {
    bytes -= log.sizes[from + count]!;
    count++;
    data--;
  }
  if (count === 0) return;
  log.events.splice(from, count);
  log.sizes.splice(from, count);
  log.bytes = bytes;
}

const logId = (k: StreamKey) => `${k.userKey}:${k.sessionId}:${k.streamId}`;
