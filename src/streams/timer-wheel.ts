/**
 * One timer for many periodic jobs of the same period: the keep-alive comments of every
 * idle SSE stream (sse-writer.ts), the renewal of every standalone stream lease
 * (stream-leases.ts).
 *
 * A timer per stream cost two `Timeout`s, their callbacks and closure contexts, about 0.5 KiB
 * of heap per idle stream (issue 29: 10,000 idle standalone streams within 300 MB of gateway
 * RSS; bench/README.md "Memory per idle stream"). Here a stream costs one entry in a `Set`.
 *
 * The period is cut into `slots` ticks. A member joins the slot the wheel has just visited,
 * so it is visited first one full turn later, then every turn: its first visit comes between
 * `periodMs - periodMs / slots` and `periodMs` after it joined, and the next ones exactly
 * `periodMs` apart — never later than its own timer would have been, at most one tick earlier
 * the first time. The timer runs only while the wheel has members, and never keeps the
 * process alive (`unref`), as the timers it replaces.
 */
export class TimerWheel<T> {
  readonly #slots: Array<Set<T>>;
  readonly #tickMs: number;
  readonly #visit: (member: T) => void;
  #cursor = 0;
  #size = 0;
  #timer: NodeJS.Timeout | undefined;

  /** `visit` runs once per period for each member; what it throws is not the wheel's to handle and must not be thrown. */
  constructor(periodMs: number, visit: (member: T) => void, slots = 8) {
    const count = Math.max(1, Math.min(slots, Math.floor(periodMs)));
    this.#slots = Array.from({ length: count }, () => new Set<T>());
    this.#tickMs = periodMs / count;
    this.#visit = visit;
  }

  /** How many members the wheel visits. */
  get size(): number {
    return this.#size;
  }

  add(member: T): void {
    if (this.#has(member)) return;
    this.#slots[this.#cursor]!.add(member);
    if (this.#size++ === 0) this.#start();
  }

  delete(member: T): void {
    for (const slot of this.#slots) {
      if (!slot.delete(member)) continue;
      if (--this.#size === 0) this.#stop();
      return;
    }
  }

  #has(member: T): boolean {
    return this.#slots.some((slot) => slot.has(member));
  }

  #start(): void {
    this.#timer = setInterval(() => this.#tick(), this.#tickMs);
    this.#timer.unref();
  }

  #stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    this.#cursor = (this.#cursor + 1) % this.#slots.length;
    // A copy is walked: a member added by a visit joins this slot and must wait a full turn,
    // and one a visit removes (a stream that ends on its keep-alive) is simply gone.
    const slot = this.#slots[this.#cursor]!;
    for (const member of [...slot]) if (slot.has(member)) this.#visit(member);
  }
}
