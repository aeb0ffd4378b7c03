/**
 * Client MCP sessions (MCP 2025-11-25 "Transports" §"Session Management"): ids are 256-bit
 * random values; records are stored under the user's key with an idle TTL. Looking up a
 * session with someone else's token finds nothing, which the routes answer with 404, the
 * same as an unknown or expired id, so that nothing reveals another user's session.
 *
 * One user holds at most `sessions.maxPerUser` sessions (issue 13): creating one more ends
 * the least recently used of their idle sessions, or when none is idle the least recently
 * used of those in use (issue 28 §7; in use: `inUse`, session-activity.ts), in the store's
 * same atomic step, and `onEvicted` ends what hangs off it (streams, the backend session:
 * session-eviction.ts). Records keep only a bounded copy of
 * the client's capabilities (client-capabilities.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { StateUnavailableError } from '../state/errors.js';
import type { EvictedSession, SessionRecord, StateStore } from '../state/store.js';
import { storedClientCapabilities } from './client-capabilities.js';
import { DEFAULT_SESSION_CACHE_LIMITS, SessionCache, type SessionCacheLimits } from './session-cache.js';
import { SessionActivity, type SessionActivityOptions, type SessionUse } from './session-activity.js';

/** Characters of a session id: 32 random bytes in base64url (RFC 4648 §5), unpadded. */
const SESSION_ID_LENGTH = 43;

/**
 * Whether `id` has the form this gateway issues ({@link newSessionId}); anything else is
 * not looked up. A loop over the char codes, not a regular expression: it runs on every
 * message (issue 29).
 */
export function isSessionIdForm(id: string): boolean {
  if (id.length !== SESSION_ID_LENGTH) return false;
  for (let i = 0; i < SESSION_ID_LENGTH; i++) {
    const c = id.charCodeAt(i);
    const alphanumeric = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
    if (!alphanumeric && c !== 0x2d && c !== 0x5f) return false;
  }
  return true;
}

export function newSessionId(): string {
  return randomBytes(32).toString('base64url');
}

/** How long a cached session record is used before the store is asked (and its TTL slid) again. */
export const SESSION_CACHE_MAX_AGE_MS = 5_000;

export interface SessionServiceOptions {
  /** `sessions.maxPerUser`; unset: no cap. */
  maxPerUser?: number;
  /** Ends what hangs off sessions evicted under the cap (streams, backend sessions); must not throw. */
  onEvicted?: (principal: Principal, evicted: EvictedSession[]) => void;
  cacheLimits?: SessionCacheLimits;
  /** The in-use marks' lease and renewal (tests shorten them). */
  inUse?: Omit<SessionActivityOptions, 'onError'>;
}

export class SessionService {
  readonly #cache: SessionCache;
  readonly #options: SessionServiceOptions;
  readonly #activity: SessionActivity;

  constructor(
    readonly store: StateStore,
    readonly idleTtlMs: number,
    /** Told about every failed store operation (metrics). */
    readonly onStoreError: (operation: string) => void = () => {},
    /** Tells the other replicas that a session ended or changed, so they drop it from their caches. */
    readonly announce: (change: 'ended' | 'changed', userKey: string, sessionId: string) => Promise<void> = async () => {},
    options: SessionServiceOptions = {},
  ) {
    this.#options = options;
    this.#cache = new SessionCache(SESSION_CACHE_MAX_AGE_MS, options.cacheLimits ?? DEFAULT_SESSION_CACHE_LIMITS);
    this.#activity = new SessionActivity(store, { ...options.inUse, onError: () => onStoreError('markSessionsInUse') });
  }

  /** Stores a new session; the user's sessions beyond `maxPerUser` end, least recently used and idle first. */
  async create(principal: Principal, sessionId: string, record: SessionRecord): Promise<void> {
    const stored = bounded(record);
    const evicted = await this.#guard('createSession', () => this.store.createSession(principal.userKey, sessionId, stored, this.idleTtlMs, this.#options.maxPerUser));
    this.#cache.set(principal.userKey, sessionId, stored);
    if (!evicted.length) return;
    for (const { sessionId: ended } of evicted) {
      this.#cache.forget(principal.userKey, ended);
      await this.announce('ended', principal.userKey, ended).catch(() => {});
    }
    this.#options.onEvicted?.(principal, evicted);
  }

  /** The session when it exists for this user and this backend; undefined otherwise. */
  async find(principal: Pick<Principal, 'userKey'>, sessionId: string, backend: string): Promise<SessionRecord | undefined> {
    if (!isSessionIdForm(sessionId)) return undefined;
    let record = this.#cache.get(principal.userKey, sessionId);
    if (!record) {
      record = await this.#guard('touchSession', () => this.store.touchSession(principal.userKey, sessionId, this.idleTtlMs));
      if (record) this.#cache.set(principal.userKey, sessionId, record);
    }
    return record && record.backend === backend ? record : undefined;
  }

  async remove(principal: Principal, sessionId: string): Promise<void> {
    this.#cache.forget(principal.userKey, sessionId);
    await this.#guard('deleteSession', () => this.store.deleteSession(principal.userKey, sessionId));
    await this.announce('ended', principal.userKey, sessionId).catch(() => {});
  }

  /** Replaces the record of a live session (false when it has ended meanwhile). */
  async update(principal: Pick<Principal, 'userKey'>, sessionId: string, record: SessionRecord): Promise<boolean> {
    const stored = bounded(record);
    const replaced = await this.#guard('replaceSession', () => this.store.replaceSession(principal.userKey, sessionId, stored, this.idleTtlMs));
    if (!replaced) {
      this.#cache.forget(principal.userKey, sessionId);
      return false;
    }
    this.#cache.set(principal.userKey, sessionId, stored);
    await this.announce('changed', principal.userKey, sessionId).catch(() => {});
    return true;
  }

  /**
   * The session is in use — a client stream open here, or a call in flight — until the
   * returned function is called: eviction takes it last (session-activity.ts).
   */
  inUse(userKey: string, sessionId: string, use: SessionUse): () => void {
    return this.#activity.begin(userKey, sessionId, use);
  }

  /** Stops renewing in-use marks (the app closes; the marks lapse by themselves) and sweeping the cache. */
  close(): void {
    this.#activity.close();
    this.#cache.close();
  }

  /** Session records held in this process (tests and metrics): idle ones leave within {@link SESSION_CACHE_MAX_AGE_MS}. */
  get cachedRecords(): number {
    return this.#cache.size;
  }

  /** Another replica ended this session. */
  forget(userKey: string, sessionId: string): void {
    this.#cache.forget(userKey, sessionId);
  }

  async #guard<T>(name: string, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (err) {
      this.onStoreError(name);
      // The Redis store throws one itself once it has waited out its bound (state/store-waits.ts).
      throw err instanceof StateUnavailableError ? err : new StateUnavailableError(err);
    }
  }
}

/** The record as stored: the client's capabilities cut down to what the gateway uses. */
function bounded(record: SessionRecord): SessionRecord {
  return { ...record, clientCapabilities: storedClientCapabilities(record.clientCapabilities) };
}
