/**
 * One user's sessions in the memory store, in the order `sessions.maxPerUser` evicts them
 * (SPEC §8 "Budgets", issue 28 §7): the memory twin of the Redis store's `si:` index (by last
 * use) and `su:` marks (in use until when; redis-scripts.ts). Sessions not in use go first,
 * least recently used first; sessions in use go after every idle one, in the same order.
 */
export class SessionUses {
  /** Session ids, least recently used first (Map order: a use moves an id to the end). */
  readonly #byLastUse = new Map<string, true>();
  /** Sessions marked in use, until when (ms since the epoch). */
  readonly #inUseUntil = new Map<string, number>();

  get size(): number {
    return this.#byLastUse.size;
  }

  ids(): string[] {
    return [...this.#byLastUse.keys()];
  }

  has(sessionId: string): boolean {
    return this.#byLastUse.has(sessionId);
  }

  /** Records a use: the session becomes the most recently used. */
  used(sessionId: string): void {
    this.#byLastUse.delete(sessionId);
    this.#byLastUse.set(sessionId, true);
  }

  /** Marks a known session in use until `until` (a later mark wins) and records a use. */
  markInUse(sessionId: string, until: number): void {
    if (!this.has(sessionId)) return;
    this.used(sessionId);
    this.#inUseUntil.set(sessionId, Math.max(until, this.#inUseUntil.get(sessionId) ?? 0));
  }

  /** Ends the session's in-use mark and records a use. */
  release(sessionId: string): void {
    this.#inUseUntil.delete(sessionId);
    if (this.has(sessionId)) this.used(sessionId);
  }

  remove(sessionId: string): void {
    this.#byLastUse.delete(sessionId);
    this.#inUseUntil.delete(sessionId);
  }

  /** Every session, the first to evict first: idle ones, then those in use at `now`. */
  evictionOrder(now: number): string[] {
    const ids = this.ids();
    const inUse = (id: string) => (this.#inUseUntil.get(id) ?? 0) > now;
    return [...ids.filter((id) => !inUse(id)), ...ids.filter(inUse)];
  }
}
