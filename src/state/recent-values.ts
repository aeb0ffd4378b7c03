/**
 * Values this replica read from (or wrote to) the store lately, kept in process for a while so
 * that a hot path costs no store round trip (SPEC §7: one Redis round trip per message at most).
 * Entries die after `maxAgeMs`, and the oldest one makes room when `maxEntries` are held; a
 * value set again moves to the back. What another replica may change is dropped by its owner
 * when the change is announced, or lives out its age.
 */
export class RecentValues<V> {
  readonly #entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly maxAgeMs: number,
    private readonly maxEntries: number,
  ) {}

  get(key: string): V | undefined {
    const held = this.#entries.get(key);
    return held && held.until > Date.now() ? held.value : undefined;
  }

  /** Keeps `value` (returned, for chaining). */
  set(key: string, value: V): V {
    this.#entries.delete(key);
    if (this.#entries.size >= this.maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value, until: Date.now() + this.maxAgeMs });
    return value;
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}
