/**
 * Recently used session records, in process (issue 7: no Redis read per proxied message).
 * A record never changes after `initialize`; it only ends. So a cached record is reused
 * until it is older than `maxAgeMs` — then the store is asked again, which also slides the
 * idle TTL there — or until an end is announced (locally, or by another replica over the
 * coordinator). Should an announcement be missed, the entry still dies within `maxAgeMs`,
 * and a session whose backend session was deleted meets the backend's 404 first.
 */
import type { SessionRecord } from '../state/store.js';

interface Cached {
  record: SessionRecord;
  fetchedAt: number;
}

export class SessionCache {
  readonly #entries = new Map<string, Cached>();

  constructor(
    private readonly maxAgeMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(userKey: string, sessionId: string): SessionRecord | undefined {
    const key = `${userKey}:${sessionId}`;
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (Date.now() - entry.fetchedAt > this.maxAgeMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.record;
  }

  set(userKey: string, sessionId: string, record: SessionRecord): void {
    const key = `${userKey}:${sessionId}`;
    this.#entries.delete(key);
    if (this.#entries.size >= this.maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { record, fetchedAt: Date.now() });
  }

  forget(userKey: string, sessionId: string): void {
    this.#entries.delete(`${userKey}:${sessionId}`);
  }

  get size(): number {
    return this.#entries.size;
  }
}
