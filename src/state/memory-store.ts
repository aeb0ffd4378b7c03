/**
 * In-process implementation of the state contract for the embedded development default
 * and unit tests. One replica only: nothing here is shared between processes.
 *
 * TTLs go through ttl.ts's wholeMs as the Redis store's do, so a caller that computes a
 * nonsense TTL (NaN, 0, negative) is refused here too, in the tests that use this store,
 * rather than only in production against Redis.
 */
import { MemoryReplayLogs } from './memory-replay-logs.js';
import { SessionUses } from './memory-session-uses.js';
import { wholeMs } from './ttl.js';
import { DEFAULT_REPLAY_BUDGET, type EvictedSession, type ReplayBudget, type ReplayLimits, type SessionRecord, type StateStore, type StoredEvent, type StreamKey } from './store.js';

interface Entry<T> {
  value: T;
  expiresAt: number;
}

export class MemoryStore implements StateStore {
  readonly kind = 'memory' as const;
  readonly #sessions = new Map<string, Entry<SessionRecord>>();
  /** Each user's sessions by last use and in-use marks: the index `sessions.maxPerUser` counts. */
  readonly #userSessions = new Map<string, SessionUses>();
  readonly #streams: MemoryReplayLogs;
  readonly #values = new Map<string, Entry<string>>();
  readonly #fields = new Map<string, Map<string, string>>();
  readonly #sweeper: NodeJS.Timeout;

  constructor(sweepIntervalMs = 60_000, replayBudget: ReplayBudget = DEFAULT_REPLAY_BUDGET) {
    this.#streams = new MemoryReplayLogs(replayBudget);
    this.#sweeper = setInterval(() => this.#sweep(), sweepIntervalMs);
    this.#sweeper.unref();
  }

  async createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number, maxPerUser?: number): Promise<EvictedSession[]> {
    const ttl = wholeMs(ttlMs, 'createSession');
    this.#sessions.set(sessionKey(userKey, sessionId), { value: structuredClone(record), expiresAt: Date.now() + ttl });
    const uses = this.#usesOf(userKey);
    uses.used(sessionId);
    if (maxPerUser === undefined || uses.size <= maxPerUser) return [];
    for (const id of uses.ids()) if (!live(this.#sessions, sessionKey(userKey, id))) uses.remove(id);
    const evicted: EvictedSession[] = [];
    for (const id of uses.evictionOrder(Date.now())) {
      if (uses.size <= maxPerUser) break;
      if (id === sessionId) continue;
      const key = sessionKey(userKey, id);
      evicted.push({ sessionId: id, record: this.#sessions.get(key)!.value });
      this.#sessions.delete(key);
      uses.remove(id);
    }
    return evicted;
  }

  async markSessionsInUse(userKey: string, sessionIds: readonly string[], leaseMs: number): Promise<void> {
    const until = Date.now() + wholeMs(leaseMs, 'markSessionsInUse');
    const uses = this.#userSessions.get(userKey);
    for (const id of sessionIds) if (live(this.#sessions, sessionKey(userKey, id))) uses?.markInUse(id, until);
  }

  async releaseSessionInUse(userKey: string, sessionId: string): Promise<void> {
    this.#userSessions.get(userKey)?.release(sessionId);
  }

  #usesOf(userKey: string): SessionUses {
    let uses = this.#userSessions.get(userKey);
    if (!uses) this.#userSessions.set(userKey, (uses = new SessionUses()));
    return uses;
  }

  async replaceSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<boolean> {
    const ttl = wholeMs(ttlMs, 'replaceSession');
    if (!live(this.#sessions, sessionKey(userKey, sessionId))) return false;
    this.#sessions.set(sessionKey(userKey, sessionId), { value: structuredClone(record), expiresAt: Date.now() + ttl });
    return true;
  }

  async touchSession(userKey: string, sessionId: string, ttlMs: number): Promise<SessionRecord | undefined> {
    const ttl = wholeMs(ttlMs, 'touchSession');
    const entry = live(this.#sessions, sessionKey(userKey, sessionId));
    if (!entry) return undefined;
    entry.expiresAt = Date.now() + ttl;
    this.#usesOf(userKey).used(sessionId);
    return structuredClone(entry.value);
  }

  async deleteSession(userKey: string, sessionId: string): Promise<boolean> {
    this.#userSessions.get(userKey)?.remove(sessionId);
    return this.#sessions.delete(sessionKey(userKey, sessionId));
  }

  async appendEvents(key: StreamKey, events: readonly StoredEvent[], limits: ReplayLimits): Promise<void> {
    const ttlMs = wholeMs(limits.ttlMs, 'appendEvents');
    if (events.length) this.#streams.append(key, events, ttlMs === limits.ttlMs ? limits : { ...limits, ttlMs });
  }

  async readEvents(key: StreamKey): Promise<StoredEvent[]> {
    return this.#streams.read(key);
  }

  async putValue(key: string, value: string, ttlMs?: number): Promise<void> {
    this.#values.set(key, { value, expiresAt: ttlMs === undefined ? Infinity : Date.now() + wholeMs(ttlMs, 'putValue') });
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
    const ttl = wholeMs(ttlMs, 'putValueIfAbsent');
    if (live(this.#values, key)) return false;
    await this.putValue(key, value, ttl);
    return true;
  }

  async deleteValueIf(key: string, expected: string): Promise<boolean> {
    return live(this.#values, key)?.value === expected && this.#values.delete(key);
  }

  async deleteValue(key: string): Promise<boolean> {
    return live(this.#values, key) !== undefined && this.#values.delete(key);
  }

  async putFieldIfAbsent(key: string, field: string, value: string): Promise<boolean> {
    const fields = this.#fieldsOf(key);
    if (fields.has(field)) return false;
    fields.set(field, value);
    return true;
  }

  async putField(key: string, field: string, value: string): Promise<void> {
    this.#fieldsOf(key).set(field, value);
  }

  async getFields(key: string): Promise<Record<string, string>> {
    return Object.fromEntries(this.#fields.get(key) ?? []);
  }

  async deleteField(key: string, field: string): Promise<boolean> {
    return this.#fields.get(key)?.delete(field) ?? false;
  }

  #fieldsOf(key: string): Map<string, string> {
    let fields = this.#fields.get(key);
    if (!fields) this.#fields.set(key, (fields = new Map()));
    return fields;
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
    this.#userSessions.clear();
    this.#streams.clear();
    this.#values.clear();
  }

  #sweep(): void {
    const now = Date.now();
    for (const map of [this.#sessions, this.#values] as Map<string, Entry<unknown>>[]) {
      for (const [k, e] of map) if (e.expiresAt <= now) map.delete(k);
    }
    for (const [userKey, uses] of this.#userSessions) {
      for (const id of uses.ids()) if (!this.#sessions.has(sessionKey(userKey, id))) uses.remove(id);
      if (uses.size === 0) this.#userSessions.delete(userKey);
    }
    this.#streams.sweep(now);
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
