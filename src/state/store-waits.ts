/**
 * A Redis blip does not fail the request that meets it (issue 45 §1; SPEC §8 "Store waits",
 * `redis.unavailableWait`). An operation that finds the connection reconnecting or failing
 * over waits, bounded, for it to be `ready` again and is then sent (again, where that is
 * safe); only past the bound does it fail with {@link StateUnavailableError}, which the
 * routes answer with 503 `-32013` and `Retry-After` as before.
 *
 * How an operation uses it (redis-store.ts, redis-coordinator.ts): it calls Redis directly
 * inside a `try`, and only its `catch` hands the failure to {@link StoreWaits.again} with the
 * call to repeat, as a function of the client and its arguments. So while Redis is ready an
 * operation costs exactly what it did — no status check, no closure, no extra await — and
 * a connection that is not ready is found by the call itself: ioredis refuses it at once
 * ("Stream isn't writeable…": no offline queue, redis-connection.ts).
 *
 * What may be sent again (the {@link Retry} each operation declares, with its reason in its
 * JSDoc):
 * - a call that certainly did not run — refused before it was written (not ready), or
 *   answered LOADING, READONLY, CLUSTERDOWN, TRYAGAIN, MASTERDOWN, NOREPLICAS or BUSY, which
 *   Redis sends without running the command — is sent again whatever it does;
 * - a call that was written and then lost its answer (the connection closed under it, or
 *   the command timed out) may or may not have run. It is sent again only when running it
 *   twice leaves the same state as once (`idempotent`: SET, PEXPIRE, GET, DEL, the
 *   compare-and-set scripts, the replay-log append, which skips what already ran, …).
 *   Operations that would write twice (publishing, a mailbox post, INCR) or would answer
 *   wrongly (SET NX: "someone else holds it" for one's own lock) fail instead
 *   (`unsent-only`). ioredis itself never sends a lost call again
 *   (`autoResendUnfulfilledCommands: false`, `retryDelayOnFailover: 0`: redis-connection.ts).
 * Any other error (a reply such as WRONGTYPE, a TTL refused before sending) passes through
 * unchanged: it is not the store being away.
 *
 * Bounds: one operation waits at most `waitMs` from its first failure (plus its last
 * attempt, itself bounded by the command timeout); at most `maxHeld` operations wait at a
 * time on this replica, and one more is refused at once (503) so that a long outage cannot
 * pile up requests in memory. `waitMs` 0 turns waiting off: every failure passes through at
 * once, as before issue 45.
 *
 * Each wait is reported to the listeners (metrics: `switchboard_store_waits_total{outcome}`
 * and `switchboard_store_wait_seconds`, wired in app.ts): `served` (answered after waiting),
 * `gave_up` (the bound passed, the store closed while waiting, or a call that lost its
 * answer could not be sent again: at once, 0 s), `refused` (over `maxHeld`; no wait).
 */
// The module's `performance`, not the global one: `globalThis.performance` is a getter, about 180 instructions a read (issue 44).
import { performance } from 'node:perf_hooks';
import { StateUnavailableError } from './errors.js';
import { isCluster, type RedisClient } from './redis-connection.js';

/**
 * When an operation's failed call may be sent again: `idempotent` — after any connection
 * failure (running it twice leaves what running it once does); `unsent-only` — only when it
 * certainly did not run.
 */
export type Retry = 'idempotent' | 'unsent-only';

export type StoreWaitOutcome = 'served' | 'gave_up' | 'refused';
/** `seconds`: how long the operation waited (0 for `refused`). */
export type StoreWaitListener = (outcome: StoreWaitOutcome, seconds: number) => void;

export interface StoreWaitsOptions {
  /** `redis.unavailableWait` in ms; 0: no waiting. */
  waitMs: number;
  /** Operations that may wait at once on this replica (default {@link DEFAULT_MAX_HELD}). */
  maxHeld?: number;
}

/**
 * Operations one replica holds while the store is away. A held operation is a request
 * waiting (its socket, parsed body and reply: a few KiB); 1,000 of them is a few MiB, and
 * more than a replica serves from the store in the default 5 s wait.
 */
export const DEFAULT_MAX_HELD = 1_000;
/** Between two attempts while the client says `ready` but calls still fail (a cluster node lost, a demoted master). */
export const RETRY_PAUSE_MS = 100;

/** How a failed call failed, as far as sending it again goes; undefined: not a connection failure. */
type Failure = 'unsent' | 'ambiguous';

/** Replies Redis sends instead of running the command: the server is loading, a replica, or the cluster is down. */
const REFUSED_REPLY = /^(LOADING|READONLY|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|NOREPLICAS|BUSY|MOVED|ASK)\b/;
/** ioredis refusing a call it did not write (no offline queue). */
const NOT_WRITTEN = /^(Stream isn't writeable|Cluster isn't ready)/;
/** The cluster gave up redirecting; what decides is its last error. */
const REDIRECTIONS = /^Too many Cluster redirections\. Last error: (?:\w*Error: )?(.*)$/s;

/** Whether `err` is the store being away, and whether the call may have run. */
export function failureOf(err: unknown): Failure | undefined {
  if (!(err instanceof Error)) return undefined;
  const { message } = err;
  if (err.name === 'ReplyError') return REFUSED_REPLY.test(message) ? 'unsent' : undefined;
  if (NOT_WRITTEN.test(message)) return 'unsent';
  // Written, then the connection closed (MaxRetriesPerRequestError, an AbortError) or the answer never came.
  if (err.name === 'MaxRetriesPerRequestError' || err.name === 'AbortError' || message === 'Command timed out' || message === 'Connection is closed.') return 'ambiguous';
  const redirected = REDIRECTIONS.exec(message);
  if (redirected) return REFUSED_REPLY.test(redirected[1]!) ? 'unsent' : 'ambiguous';
  return undefined;
}

export class StoreWaits {
  readonly #client: RedisClient;
  readonly #waitMs: number;
  readonly #maxHeld: number;
  readonly #listeners: StoreWaitListener[] = [];
  /** Wakes every waiter (the connection is ready, ended, or the store closed). */
  readonly #wakers = new Set<() => void>();
  #held = 0;
  #closed = false;

  constructor(client: RedisClient, options: StoreWaitsOptions) {
    this.#client = client;
    this.#waitMs = Math.max(0, options.waitMs);
    this.#maxHeld = options.maxHeld ?? DEFAULT_MAX_HELD;
    if (this.#waitMs > 0) {
      client.on('ready', () => this.#wakeAll());
      client.on('end', () => this.#wakeAll());
    }
  }

  /** Operations waiting now. */
  get held(): number {
    return this.#held;
  }

  get waitMs(): number {
    return this.#waitMs;
  }

  /** Told of every wait's end (metrics). */
  observe(listener: StoreWaitListener): void {
    this.#listeners.push(listener);
  }

  /** Waiters give up at once, and nothing waits any more (the store closes). */
  close(): void {
    this.#closed = true;
    this.#wakeAll();
  }

  /**
   * After `call(...args)` failed with `first`: waits for the store and calls again, as
   * `retry` allows, until it answers or the bound passes. Returns the answer; throws
   * `first` (or a later failure) unchanged when it is not the store being away or waiting
   * is off, and {@link StateUnavailableError} when the store stayed away.
   */
  async again<A extends unknown[], T>(first: unknown, retry: Retry, call: (...args: A) => Promise<T>, ...args: A): Promise<T> {
    const failure = failureOf(first);
    if (failure === undefined || this.#waitMs === 0) throw first;
    if (this.#closed) throw new StateUnavailableError(first);
    if (failure === 'ambiguous' && retry === 'unsent-only') {
      this.#report('gave_up', 0);
      throw new StateUnavailableError(first);
    }
    if (this.#held >= this.#maxHeld) {
      this.#report('refused', 0);
      throw new StateUnavailableError(first);
    }
    this.#held++;
    const started = performance.now();
    const deadline = started + this.#waitMs;
    let last = first;
    try {
      for (let attempt = 1; ; attempt++) {
        if (!(await this.#until(deadline, attempt))) break;
        try {
          const answer = await call(...args);
          this.#report('served', (performance.now() - started) / 1000);
          return answer;
        } catch (err) {
          const next = failureOf(err);
          if (next === undefined) {
            // Redis answered (an error of the operation's own): the store is back.
            this.#report('served', (performance.now() - started) / 1000);
            throw err;
          }
          last = err;
          if (next === 'ambiguous' && retry === 'unsent-only') break;
        }
      }
      this.#report('gave_up', (performance.now() - started) / 1000);
      throw new StateUnavailableError(last);
    } finally {
      this.#held--;
    }
  }

  /**
   * Resolves true when it is time for attempt `attempt`, false once `deadline` passed or the
   * store closed. The first attempt goes at once if the connection is ready already (it came
   * back before the failure was seen); later ones, while the client says ready but calls
   * fail, pause {@link RETRY_PAUSE_MS} between them.
   */
  async #until(deadline: number, attempt: number): Promise<boolean> {
    // A call that failed while the client said ready pauses before the next; one that comes
    // back from a reconnect goes at once.
    let pause = attempt > 1;
    for (;;) {
      if (this.#closed || this.#client.status === 'end') return false;
      const left = deadline - performance.now();
      if (left <= 0) return false;
      if (this.#client.status === 'ready') {
        if (!pause) return true;
        pause = false;
        // A cluster whose node is gone learns the new owner of its slots (ioredis refreshes
        // once at a time); a standalone or sentinel client reconnects by itself.
        if (isCluster(this.#client)) this.#client.refreshSlotsCache();
        await this.#sleep(Math.min(RETRY_PAUSE_MS, left));
        continue;
      }
      pause = false;
      await this.#sleep(left);
    }
  }

  /** Resolves after `ms`, or sooner when the connection becomes ready or ends. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#wakers.add(wake);
    });
  }

  #wakeAll(): void {
    for (const wake of [...this.#wakers]) wake();
  }

  #report(outcome: StoreWaitOutcome, seconds: number): void {
    for (const listener of this.#listeners) listener(outcome, seconds);
  }
}
