/**
 * In-process implementation of the state contract for the embedded development default
 * and unit tests. One replica only: nothing here is shared between processes.
 */
import type { ReplayLimits, SessionRecord, StateStore, StoredEvent, StreamKey } from './store.js';

interface Entry<T> {
  value: T;
  expiresAt: number;
}

export class MemoryStore implements StateStore {
  readonly kind = 'memory' as const;
  readonly #sessions = new Map<string, Entry<SessionRecord>>();
  readonly #streams = new Map<string, Entry<StoredEvent[]>>();
  readonly #values = new Map<string, Entry<string>>();
  readonly #sweeper: NodeJS.Timeout;

  constructor(sweepIntervalMs = 60_000) {
    this.#sweeper = setInterval(() => this.#sweep(), sweepIntervalMs);
    this.#sweeper.unref();
  }

  async createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<void> {
    this.#sessions.set(sessionKey(userKey, sessionId), { value: structuredClone(record), expiresAt: Date.now() + ttlMs });
  }

  async replaceSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<boolean> {
    if (!live(this.#sessions, sessionKey(userKey, sessionId))) return false;
    this.#sessions.set(sessionKey(userKey, sessionId), { value: structuredClone(record), expiresAt: Date.now() + ttlMs });
    return true;
  }

  async touchSession(userKey: string, sessionId: string, ttlMs: number): Promise<SessionRecord | undefined> {
    const entry = live(this.#sessions, sessionKey(userKey, sessionId));
    if (!entry) return undefined;
    entry.expiresAt = Date.now() + ttlMs;
    return structuredClone(entry.value);
  }

  async deleteSession(userKey: string, sessionId: string): Promise<boolean> {
    return this.#sessions.delete(sessionKey(userKey, sessionId));
  }

  async appendEvents(key: StreamKey, events: readonly StoredEvent[], limits: ReplayLimits): Promise<void> {
    const id = streamKey(key);
    const entry = live(this.#streams, id) ?? { value: [], expiresAt: 0 };
    entry.value.push(...events.map((e) => structuredClone(e)));
    if (entry.value.length > limits.maxEvents) entry.value.splice(0, entry.value.length - limits.maxEvents);
    entry.expiresAt = Date.now() + limits.ttlMs;
    this.#streams.set(id, entry);
  }

  async readEvents(key: StreamKey): Promise<StoredEvent[]> {
    return structuredClone(live(this.#streams, streamKey(key))?.value ?? []);
  }

  async putValue(key: string, value: string, ttlMs?: number): Promise<void> {
    this.#values.set(key, { value, expiresAt: ttlMs === undefined ? Infinity : Date.now() + ttlMs });
  }

  async getValue(key: string): Promise<string | undefined> {
    return live(this.#values, key)?.value;
  }

  async takeValue(key: string): Promise<string | undefined> {
    const value = live(this.#values, key)?.value;
    this.#values.delete(key);
    return value;
  }

  async putValueIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    if (live(this.#values, key)) return false;
    await this.putValue(key, value, ttlMs);
    return true;
  }

  async deleteValueIf(key: string, expected: string): Promise<boolean> {
    return live(this.#values, key)?.value === expected && this.#values.delete(key);
  }

  async deleteValue(key: string): Promise<boolean> {
    return live(this.#values, key) !== undefined && this.#values.delete(key);
  }

  async countSessions(): Promise<number> {
    const now = Date.now();
    let count = 0;
    for (const entry of this.#sessions.values()) if (entry.expiresAt > now) count++;
    return count;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    this.#sessions.clear();
    this.#streams.clear();
    this.#values.clear();
  }

  #sweep(): void {
    const now = Date.now();
    for (const map of [this.#sessions, this.#streams, this.#values] as Map<string, Entry<unknown>>[]) {
      for (const [k, e] of map) if (e.expiresAt <= now) map.delete(k);
    }
  }
}

function live<T>(map: Map<string, Entry<T>>, key: string): Entry<T> | undefined {
  const entry = map.get(key);
  if (!entry) return undefined;
  if (entry.expiresAt <= Date.now()) {
    map.delete(key);
    return undefined;
  }
  return entry;
}

const sessionKey = (userKey: string, sessionId: string) => `${userKey}:${sessionId}`;
const streamKey = (k: StreamKey) => `${k.userKey}:${k.sessionId}:${k.streamId}`;
