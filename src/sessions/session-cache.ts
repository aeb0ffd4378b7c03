/**
 * Recently used session records, in process (issue 7: no Redis read per proxied message).
 * A record never changes after `initialize`; it only ends. So a cached record is reused
 * until it is older than `maxAgeMs` — then the store is asked again, which also slides the
 * idle TTL there — or until an end is announced (locally, or by another replica over the
 * coordinator). Should an announcement be missed, the entry still dies within `maxAgeMs`,
 * and a session whose backend session was deleted meets the backend's 404 first.
 *
 * An entry older than `maxAgeMs` is of no use (the next read asks the store anyway), so a
 * sweep drops such entries every `maxAgeMs` while the cache holds any: an idle session
 * costs this replica nothing after that, only its record in the store (issue 45 §3: 10,000
 * idle sessions kept 10,000 records here for as long as nothing pushed them out). The
 * sweep reads from the oldest entry on and stops at the first young one: entries are in
 * the order they were fetched, since `set` always puts its entry last.
 */
import type { SessionRecord } from '../state/store.js';

interface Cached {
  /** Whose session it is: an entry is found only by its owner. */
  userKey: string;
  record: SessionRecord;
  fetchedAt: number;
  bytes: number;
}

/**
 * Bounds of the cache: entries, and bytes of records (their JSON) — a record is small once
 * the client's capabilities are cut down (client-capabilities.ts), but an aggregated
 * session's record carries its members, so entries alone do not bound memory (issue 13).
 * A record larger than `maxRecordBytes` is not cached: it is read from the store each time.
 */
export interface SessionCacheLimits {
  maxEntries: number;
  maxBytes: number;
  maxRecordBytes: number;
}

export const DEFAULT_SESSION_CACHE_LIMITS: SessionCacheLimits = { maxEntries: 10_000, maxBytes: 16 * 1024 * 1024, maxRecordBytes: 64 * 1024 };

/**
 * Entries are keyed by session id alone and carry their owner's user key, which every read
 * compares: a session id is 32 random bytes this gateway drew (session-service.ts), so it
 * names one session, and a key of user key and id joined was a string built, flattened and
 * hashed on every message (issue 29). Another user naming the id finds nothing, as before.
 */
export class SessionCache {
  readonly #entries = new Map<string, Cached>();
  #bytes = 0;
  #sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxAgeMs: number,
    private readonly limits: SessionCacheLimits = DEFAULT_SESSION_CACHE_LIMITS,
  ) {}

  get(userKey: string, sessionId: string): SessionRecord | undefined {
    const entry = this.#entries.get(sessionId);
    if (!entry || entry.userKey !== userKey) return undefined;
    if (Date.now() - entry.fetchedAt > this.maxAgeMs) {
      this.#delete(sessionId);
      return undefined;
    }
    return entry.record;
  }

  set(userKey: string, sessionId: string, record: SessionRecord): void {
    this.#delete(sessionId);
    const bytes = Buffer.byteLength(JSON.stringify(record));
    if (bytes > this.limits.maxRecordBytes) return;
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size < this.limits.maxEntries && this.#bytes + bytes <= this.limits.maxBytes) break;
      this.#delete(oldest);
    }
    this.#entries.set(sessionId, { userKey, record, fetchedAt: Date.now(), bytes });
    this.#bytes += bytes;
    // Never keeps the process alive; stops once the cache is empty (sweep).
    this.#sweeper ??= setInterval(() => this.sweep(), this.maxAgeMs).unref();
  }

  /** Drops the entries older than `maxAgeMs` (the timer's job; callable to sweep now). */
  sweep(now = Date.now()): void {
    for (const [sessionId, entry] of this.#entries) {
      if (now - entry.fetchedAt <= this.maxAgeMs) break;
      this.#delete(sessionId);
    }
    if (!this.#entries.size) this.close();
  }

  /** Stops the sweep (the app closes); entries still expire when read. */
  close(): void {
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  forget(userKey: string, sessionId: string): void {
    if (this.#entries.get(sessionId)?.userKey === userKey) this.#delete(sessionId);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Bytes of the cached records' JSON. */
  get bytes(): number {
    return this.#bytes;
  }

  #delete(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }
}
