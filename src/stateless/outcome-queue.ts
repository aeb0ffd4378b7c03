/**
 * The pieces of a handed-over attempt (bridge-replicas.ts) as the replica that holds the call
 * sends them back, one coordinator message each, numbered: given out in their order whatever
 * order they arrive in, each awaited for a bounded time. A piece without a number is the whole
 * outcome at once (what a replica of an earlier release sends).
 */
export interface OutcomePiece {
  /** The attempt's messages in this piece (JSON-RPC text). */
  messages?: string[];
  /** The HTTP status of an attempt that is one message. */
  status?: number;
  seq?: number;
  /** More pieces follow. */
  more?: boolean;
}

export class OutcomeQueue {
  readonly #arrived = new Map<number, OutcomePiece>();
  #next = 0;
  #wake: (() => void) | undefined;

  put(piece: OutcomePiece): void {
    this.#arrived.set(piece.seq ?? this.#next, piece);
    this.#wake?.();
  }

  /** The next piece in order, or undefined when none came within `timeoutMs`. */
  async next(timeoutMs: number): Promise<OutcomePiece | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#arrived.has(this.#next)) {
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
    const piece = this.#arrived.get(this.#next)!;
    this.#arrived.delete(this.#next++);
    return piece;
  }
}
