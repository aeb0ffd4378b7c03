/**
 * Where the per-user rate limit counts requests (rate-limit.ts): fixed windows, one counter
 * per key. Stores answer at once — through the callback, before `incr` returns — so that
 * the limiter never makes a request wait: in process here, and for several replicas the
 * Redis-synced {@link BatchedRateLimitStore}.
 */

/** A key's count in its current window (this request included) and the ms left in it. */
export interface RateLimitCount {
  current: number;
  ttl: number;
}

export type RateLimitCallback = (error: Error | null, result?: RateLimitCount) => void;

/** A sync with the shared counts failed ('error') or was slow ('timeout'); requests never wait for it. */
export type RateLimitFailureListener = (reason: 'error' | 'timeout', error?: Error) => void;

export interface RateLimitStore {
  /** Counts one request for `key` in its window of `windowMs` and reports where it stands. */
  incr(key: string, callback: RateLimitCallback, windowMs: number, max: number): void;
  /**
   * Reports each failed or slow sync to `listener` (rate-limit.ts counts and logs them). The
   * counter is built with the state (create-state.ts), before the metrics that count them.
   */
  onFailure(listener: RateLimitFailureListener): void;
  /** Stops the counter's timers and sends what is pending (create-state.ts closes it first). */
  close(): Promise<void>;
}

interface Window {
  count: number;
  end: number;
}

/**
 * One replica's counts, in memory (no `redis`: there is only one replica). At most
 * `maxKeys` users are tracked, least recently seen dropped first (they start again at 0).
 */
export class LocalRateLimitStore implements RateLimitStore {
  /** Map order is recency: the first entry is the least recently used. */
  readonly #windows = new Map<string, Window>();

  constructor(private readonly maxKeys = 10_000) {}

  incr(key: string, callback: RateLimitCallback, windowMs: number, _max?: number): void {
    const now = Date.now();
    let window = this.#windows.get(key);
    if (window) this.#windows.delete(key);
    else if (this.#windows.size >= this.maxKeys) this.#windows.delete(this.#windows.keys().next().value!);
    if (!window || now >= window.end) window = { count: 0, end: now + windowMs };
    window.count++;
    this.#windows.set(key, window);
    callback(null, { current: window.count, ttl: window.end - now });
  }

  get size(): number {
    return this.#windows.size;
  }

  /** Counts kept in process never fail. */
  onFailure(_listener: RateLimitFailureListener): void {}

  async close(): Promise<void> {}
}
