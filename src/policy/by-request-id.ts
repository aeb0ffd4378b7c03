/**
 * Values kept by JSON-RPC request id for the requests of one POST (its one request, or a
 * 2025-03-26 batch's): the CLIENT spans waiting for their responses
 * (telemetry/client-span-backend.ts) and the audit records waiting for theirs
 * (rule-policy-backend.ts), each a subclass, so nothing more is made per POST.
 *
 * The first request's value is held in fields and found by its id as sent: `===` holds exactly
 * when two ids' keys (`idKey`: `number:7`, `string:7`) are equal — same type, same value. A map by
 * id is made only for a batch's further requests, keyed by the id itself: a `Map` tells keys
 * apart as `===` does (SameValueZero: `7` and `"7"` are two keys, `0` and `-0` one, as their id
 * keys are). A map made per POST, and an id key made per message and compared character by
 * character, showed in the counts of a governed call (issue 44 part 1).
 */
import type { JsonRpcId } from '../wire/jsonrpc.js';

export class ByRequestId<T> {
  #firstId: JsonRpcId | undefined;
  #first: T | undefined;
  /** The values of a batch's further requests, by id. */
  #more: Map<JsonRpcId, T> | undefined;

  /** Holds `value` for request `id`; a later request of the same id takes the earlier one's place, as in a map. */
  hold(id: JsonRpcId, value: T): void {
    if (this.#first === undefined || this.#firstId === id) {
      this.#first = value;
      this.#firstId = id;
    } else (this.#more ??= new Map()).set(id, value);
  }

  /** The value held for request `id`, held no longer; undefined when none is. */
  take(id: JsonRpcId): T | undefined {
    const first = this.#first;
    if (first !== undefined && this.#firstId === id) {
      this.#first = undefined;
      return first;
    }
    if (this.#more === undefined) return undefined;
    const value = this.#more.get(id);
    if (value !== undefined) this.#more.delete(id);
    return value;
  }

  /** `value`, found by itself and held no longer (`id`: its request's id); whether it was held. */
  release(value: T, id: JsonRpcId): boolean {
    if (this.#first === value) {
      this.#first = undefined;
      return true;
    }
    return this.#more?.get(id) === value && this.#more.delete(id);
  }

  /** The value held for the first request (or a later one of its id), if it still is. */
  get firstHeld(): T | undefined {
    return this.#first;
  }

  /** Whether a value is held. */
  get holding(): boolean {
    return this.#first !== undefined || (this.#more !== undefined && this.#more.size > 0);
  }

  /** Calls `each` with every value held, in the order held, and `arg` (passed through, so `each` need not be a closure made per POST). */
  forEachHeld<A>(each: (value: T, arg: A) => void, arg: A): void {
    if (this.#first !== undefined) each(this.#first, arg);
    if (this.#more) for (const value of this.#more.values()) each(value, arg);
  }

  /** Holds nothing any more. */
  clear(): void {
    this.#first = undefined;
    this.#more?.clear();
  }
}
