/**
 * Who holds the bridge sessions of one backend (issue 13): each is a child process or an
 * open connection, so there are at most `bridge.maxSessions` for everyone and
 * `bridge.maxSessionsPerUser` for one user — one user opening sessions in a loop used to
 * take all 100 and leave the next user's `initialize` with 503. A slot is taken before the
 * child starts and given back when the session ends (or never started).
 */

/**
 * Bounds unless configured otherwise (`bridge.*`): each stdio session is a child process
 * (tens of MB each), each SSE session an open connection. Beyond them, `initialize` is refused
 * (session-refusals.ts).
 */
export const DEFAULT_MAX_BRIDGE_SESSIONS = 100;
export const DEFAULT_MAX_BRIDGE_SESSIONS_PER_USER = 10;

/** A taken slot; `release` is idempotent. */
export interface Slot {
  release(): void;
}

/** Why no slot was given: the backend is full, or this user holds their share. */
export type SlotRefusal = 'backend' | 'user';

export class SessionSlots {
  #taken = 0;
  readonly #perUser = new Map<string, number>();

  constructor(
    readonly max: number,
    readonly maxPerUser: number,
  ) {}

  /** Slots taken now (sessions open or starting). */
  get size(): number {
    return this.#taken;
  }

  /** Takes a slot for `user`; a caller with no user (not told by the gateway) counts only towards `max`. */
  take(user: string | undefined): Slot | SlotRefusal {
    if (this.#taken >= this.max) return 'backend';
    const held = user === undefined ? 0 : (this.#perUser.get(user) ?? 0);
    if (user !== undefined && held >= this.maxPerUser) return 'user';
    this.#taken++;
    if (user !== undefined) this.#perUser.set(user, held + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#taken--;
        if (user === undefined) return;
        const left = (this.#perUser.get(user) ?? 1) - 1;
        if (left > 0) this.#perUser.set(user, left);
        else this.#perUser.delete(user);
      },
    };
  }
}
