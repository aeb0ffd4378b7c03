/**
 * The backend calls the bridge holds open between two HTTP requests of a 2026-07-28 client
 * (issue 15, "Bridging"): a 2025-11-25 backend asked the client something during the call,
 * the client got an `input_required` result, and the backend's handler waits for the answer
 * that the client's retry will bring.
 *
 * A parked call lives in the memory of the replica whose connection to the backend holds it
 * (the backend's SSE answer cannot move); a retry reaching another replica is handed over to
 * this one (bridge-replicas.ts). Taking a call is exclusive, so two retries with the same
 * `requestState` cannot both answer it. A call nobody takes within `ttlMs` is given up: its
 * pending requests are answered with an error, so the backend's handler ends instead of
 * waiting, and its connection is closed. (SDK servers give up on their own requests after 60 s
 * by default; a backend that lets its user think longer sets a longer timeout.)
 *
 * One user holds at most `stateless.maxParkedPerUser` parked calls on a replica (issue 28 §5:
 * one user held sixty backend POSTs open for up to ten minutes each): {@link park} refuses one
 * more, and the bridge ends that call with an error (bridged-call.ts). Per replica, since what a
 * parked call holds — a backend connection — is this replica's.
 */
import { randomUUID } from 'node:crypto';
import type { BridgedCall } from './bridged-call.js';
import { abandoned, type PendingAsk } from './input-requests.js';

/** Under the gateway's requestState lifetime (15 min), so a state never outlives its call by much. */
export const PARK_TTL_MS = 10 * 60_000;

export interface Parked {
  call: BridgedCall;
  asks: PendingAsk[];
}

interface Held extends Parked {
  timer: NodeJS.Timeout;
}

export class ParkedCalls {
  readonly #held = new Map<string, Held>();
  /** Parked calls by user, for the bound. */
  readonly #byUser = new Map<string, number>();

  constructor(
    private readonly ttlMs: number = PARK_TTL_MS,
    /** A number, or a function read on each park (the config's value, which a reload may change). */
    private readonly maxPerUser: number | (() => number) = Number.POSITIVE_INFINITY,
  ) {}

  get size(): number {
    return this.#held.size;
  }

  /** Holds the call until a retry takes it; the id goes into the sealed requestState. Undefined when its user holds `maxPerUser` already. */
  park(call: BridgedCall, asks: PendingAsk[]): string | undefined {
    const parkedByUser = this.#byUser.get(call.userKey) ?? 0;
    if (parkedByUser >= (typeof this.maxPerUser === 'function' ? this.maxPerUser() : this.maxPerUser)) return undefined;
    this.#byUser.set(call.userKey, parkedByUser + 1);
    const id = randomUUID();
    const timer = setTimeout(() => this.#giveUp(id, 'the client did not answer in time'), this.ttlMs);
    timer.unref();
    this.#held.set(id, { call, asks, timer });
    call.messages.parked = true;
    return id;
  }

  /** Whether the call is held here (a hint: {@link take} alone is exclusive). */
  has(id: string): boolean {
    return this.#held.has(id);
  }

  /** The call, for the one retry that answers it (its user, through its endpoint only); undefined when gone, expired or taken. */
  take(id: string, by: { userKey: string; endpoint: string }): Parked | undefined {
    const held = this.#held.get(id);
    if (!held || held.call.userKey !== by.userKey || held.call.endpoint !== by.endpoint) return undefined;
    this.#forget(id, held);
    held.call.messages.parked = false;
    return { call: held.call, asks: held.asks };
  }

  /** Gives every call up (the gateway is shutting down). */
  close(): void {
    for (const id of [...this.#held.keys()]) this.#giveUp(id, 'the gateway is shutting down');
  }

  #giveUp(id: string, why: string): void {
    const held = this.#held.get(id);
    if (!held) return;
    this.#forget(id, held);
    abandon(held, why);
  }

  #forget(id: string, held: Held): void {
    this.#held.delete(id);
    clearTimeout(held.timer);
    const left = (this.#byUser.get(held.call.userKey) ?? 1) - 1;
    if (left > 0) this.#byUser.set(held.call.userKey, left);
    else this.#byUser.delete(held.call.userKey);
  }
}

/** Answers the backend's pending requests with an error and closes the call's connection. */
export function abandon(parked: Parked, why: string): void {
  void Promise.allSettled(parked.asks.map((ask) => parked.call.respond(abandoned(ask, why)))).finally(() => parked.call.messages.close());
}
