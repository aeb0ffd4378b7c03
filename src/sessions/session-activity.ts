/**
 * Which sessions this replica is using right now — a client stream open, a call in flight —
 * told to the store, so that `sessions.maxPerUser` evicts them last (SPEC §8 "Budgets",
 * issue 28 §7). Eviction runs inside the store's one atomic step (CREATE_SESSION) and must
 * see every replica's sessions, so "in use" is kept there as a lease per session
 * (`StateStore.markSessionsInUse`), renewed while the use lasts and lapsing by itself when
 * a replica dies.
 *
 * What it costs, the message path kept as it was (one store round trip at most, the read
 * that records the use: TOUCH_SESSION):
 * - a client stream (a GET: the standalone stream, a resumed one) is marked when it opens
 *   and released when it closes: two writes for something that lives long;
 * - a call is marked only when a renewal finds it still in flight, so the quick calls write
 *   nothing; a long call is marked within {@link RENEW_MS} and released when it ends;
 * - renewals write once per {@link RENEW_MS} per user with something in use here.
 */
import type { StateStore } from '../state/store.js';

/** How long a mark holds without renewal: a dead replica's sessions count as idle after it. */
export const IN_USE_LEASE_MS = 10_000;
/** How often marks of sessions still in use are renewed (and long calls first marked). */
export const RENEW_MS = IN_USE_LEASE_MS / 3;

/** A stream is marked as it opens; a call only once a renewal finds it still running. */
export type SessionUse = 'stream' | 'call';

interface Uses {
  userKey: string;
  sessionId: string;
  /** Streams and calls of the session open here. */
  count: number;
  /** Whether the store holds a mark of ours to renew and, in the end, release. */
  marked: boolean;
}

export interface SessionActivityOptions {
  leaseMs?: number;
  renewMs?: number;
  /** Told about a failed write (metrics); the use goes on, unmarked until the next renewal. */
  onError?: (err: Error) => void;
}

export class SessionActivity {
  readonly #store: Pick<StateStore, 'markSessionsInUse' | 'releaseSessionInUse'>;
  readonly #leaseMs: number;
  readonly #renewMs: number;
  readonly #onError: (err: Error) => void;
  readonly #uses = new Map<string, Uses>();
  #timer: NodeJS.Timeout | undefined;

  constructor(store: Pick<StateStore, 'markSessionsInUse' | 'releaseSessionInUse'>, options: SessionActivityOptions = {}) {
    this.#store = store;
    this.#leaseMs = options.leaseMs ?? IN_USE_LEASE_MS;
    this.#renewMs = options.renewMs ?? RENEW_MS;
    this.#onError = options.onError ?? (() => {});
  }

  /**
   * The session is in use until the returned function is called (once; later calls do nothing).
   * Uses are keyed by the session id alone: it is 32 random bytes this gateway drew, and the
   * caller found the session under `userKey` just before (a key joining both was a string
   * built and hashed on every call; issue 29).
   */
  begin(userKey: string, sessionId: string, use: SessionUse): () => void {
    let uses = this.#uses.get(sessionId);
    if (!uses) this.#uses.set(sessionId, (uses = { userKey, sessionId, count: 0, marked: false }));
    uses.count++;
    if (use === 'stream' && !uses.marked) {
      uses.marked = true;
      this.#write(this.#store.markSessionsInUse(userKey, [sessionId], this.#leaseMs));
    }
    this.#timer ??= setInterval(() => void this.renew(), this.#renewMs).unref();
    let ended = false;
    const entry = uses;
    return () => {
      if (ended) return;
      ended = true;
      if (--entry.count > 0) return;
      this.#uses.delete(sessionId);
      if (entry.marked) this.#write(this.#store.releaseSessionInUse(userKey, sessionId));
      // The timer stops at its next tick with nothing in use (renew), not here: a replica
      // answering one call at a time would otherwise start and stop it on every call.
    };
  }

  /** Marks every session in use here (again), one store call per user; the timer's job. */
  async renew(): Promise<void> {
    if (!this.#uses.size) return this.#stopTimer();
    const byUser = new Map<string, string[]>();
    for (const uses of this.#uses.values()) {
      uses.marked = true;
      const ids = byUser.get(uses.userKey);
      if (ids) ids.push(uses.sessionId);
      else byUser.set(uses.userKey, [uses.sessionId]);
    }
    await Promise.all([...byUser].map(([userKey, ids]) => this.#write(this.#store.markSessionsInUse(userKey, ids, this.#leaseMs))));
  }

  /** Sessions in use here (for tests and metrics). */
  get size(): number {
    return this.#uses.size;
  }

  close(): void {
    this.#stopTimer();
  }

  #stopTimer(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #write(operation: Promise<void>): Promise<void> {
    return operation.catch((err: Error) => this.#onError(err));
  }
}
