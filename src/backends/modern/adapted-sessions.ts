/**
 * The sessions a 2026-07-28 backend does not keep, kept by the gateway for its 2025-11-25
 * clients (issue 15, "Bridging: 2025-11-25 client → 2026 backend"). The revision moved what a
 * session held into every request's `_meta` — the revision, the client's identity and
 * capabilities, the log level — so the gateway holds those for the client and adds them to
 * each request it sends on.
 *
 * The id is the gateway's own, minted at `initialize`, given to the 2025 layer as the
 * "backend session id" (so the client's gateway session records it as for any backend), and
 * prefixed so that a call names its adapted session without a lookup. It carries the user's
 * key (`sb26-<userKey>.<random>`), so the record lives under the user in the store as all
 * per-user state does (src/state/README.md) although some paths reach the backend without a
 * caller (a GET stream joined on another replica, the aggregate's member streams). The id
 * never reaches a client (the gateway session that holds it is bound to the user); the record
 * still names its user, and a call made for another user does not find it. It lives in the
 * shared store (a call reaches any replica) and is held in memory for a minute, so a call
 * costs no store round trip; a change (the log level) is announced to every replica, which
 * drops its copy (as gateway sessions are, SPEC §5) before the client can send its next request
 * in all but a pathological race.
 */
import { randomBytes } from 'node:crypto';
import type { Coordinator } from '../../state/coordinator.js';
import { RecentValues } from '../../state/recent-values.js';
import type { StateStore } from '../../state/store.js';
import { ValueKeys } from '../../state/value-keys.js';

/** What marks a backend session id as one of the gateway's adapted sessions. */
export const ADAPTED_PREFIX = 'sb26-';
const NEAR_MS = 60_000;
const NEAR_MAX = 10_000;
/** Kept as long as a gateway session may idle by default; refreshed on every change. */
const TTL_MS = 24 * 60 * 60_000;

export interface AdaptedSession {
  /** Whose session it is (the user key of the principal that initialized it). */
  userKey: string;
  /** The 2025 revision negotiated with the client (what its later messages carry). */
  protocolVersion: string;
  /** The backend's capabilities (server/discover): which notifications a listen may ask for. */
  capabilities: Record<string, unknown>;
  /** The resources the client subscribed to (`resources/subscribe`), followed on its GET stream. */
  subscriptions?: string[];
  clientInfo?: Record<string, unknown>;
  /** The level `logging/setLevel` asked for; none: no log messages (2026-07-28 "Logging"). */
  logLevel?: string;
}

export class AdaptedSessions {
  readonly #near = new RecentValues<AdaptedSession>(NEAR_MS, NEAR_MAX);

  constructor(
    private readonly store: StateStore,
    private readonly coordinator: Pick<Coordinator, 'broadcast' | 'replicaId'>,
  ) {}

  static isAdapted(sessionId: string | undefined): sessionId is string {
    return sessionId !== undefined && sessionId.startsWith(ADAPTED_PREFIX);
  }

  async open(session: AdaptedSession): Promise<string> {
    const id = `${ADAPTED_PREFIX}${session.userKey}.${randomBytes(24).toString('base64url')}`;
    await this.#put(id, session);
    return id;
  }

  /** The session by its id; undefined when it ended, expired, or `userKey` (when the call names one) is not its user's. */
  async get(id: string, userKey: string | undefined): Promise<AdaptedSession | undefined> {
    const key = keyOf(id);
    if (key === undefined) return undefined;
    let session = this.#near.get(key);
    if (!session) {
      const stored = await this.store.getValue(key);
      if (!stored) return undefined;
      session = this.#near.set(key, JSON.parse(stored) as AdaptedSession);
    }
    return userKey === undefined || session.userKey === userKey ? session : undefined;
  }

  async update(id: string, session: AdaptedSession): Promise<void> {
    await this.#put(id, session);
    await this.coordinator.broadcast({ type: 'adapted-changed', userKey: session.userKey, sessionId: id, from: this.coordinator.replicaId });
  }

  /** Another replica changed the session: the next call reads it from the store. */
  forget(id: string): void {
    const key = keyOf(id);
    if (key !== undefined) this.#near.delete(key);
  }

  async end(id: string, session: AdaptedSession): Promise<boolean> {
    const key = keyOf(id);
    if (key === undefined) return false;
    this.#near.delete(key);
    const ended = await this.store.deleteValue(key);
    await this.coordinator.broadcast({ type: 'adapted-changed', userKey: session.userKey, sessionId: id, from: this.coordinator.replicaId });
    return ended;
  }

  async #put(id: string, session: AdaptedSession): Promise<void> {
    const key = keyOf(id);
    if (key === undefined) throw new Error('not an adapted session id');
    await this.store.putValue(key, JSON.stringify(session), TTL_MS);
    this.#near.set(key, session);
  }
}

/** The store key of an adapted session id, under its user; undefined for an id not of that form. */
function keyOf(id: string): string | undefined {
  const dot = id.indexOf('.', ADAPTED_PREFIX.length);
  if (!id.startsWith(ADAPTED_PREFIX) || dot <= ADAPTED_PREFIX.length || dot === id.length - 1) return undefined;
  return ValueKeys.adaptedSession(id.slice(ADAPTED_PREFIX.length, dot), id.slice(dot + 1));
}
