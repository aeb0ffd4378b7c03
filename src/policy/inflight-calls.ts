/**
 * The audited calls in flight, by session, then request id (rule-policy-backend.ts): what a
 * client's `notifications/cancelled` for one of them ends at once with outcome `cancelled` (MCP
 * 2025-11-25 Cancellation), instead of leaving it to the timeout. An entry goes when its record
 * is written, and a session's when it has none left, so this holds only calls still waiting for
 * their answer. By session, not by one key joining user, session and id: that key was a new
 * string of about 75 characters hashed on every call (issue 44 part 1); the session id is the
 * header's string, hashed once for the session lookup before.
 *
 * A session with one call in flight — a client that waits for each answer, the usual one —
 * holds that call itself; a `Map` by id only from its second call in flight on. A map made,
 * filled, emptied and dropped for every call was most of what this cost (issue 44 part 1).
 * Calls are found by their request id as sent, not by an id key made of it (`number:7`): a `Map`
 * tells `7` from `"7"` itself, and a number is hashed without being turned into a string first.
 */
import type { JsonRpcId } from '../wire/jsonrpc.js';

export class InflightCalls<Call extends { readonly id?: JsonRpcId }> {
  readonly #bySession = new Map<string, Call | Map<JsonRpcId, Call>>();

  /** Holds `call` under `session` and `id` (its `id`); a later call of the same id takes the place of the earlier, as in a map. */
  add(session: string, id: JsonRpcId, call: Call): void {
    const held = this.#bySession.get(session);
    if (held instanceof Map) held.set(id, call);
    else if (held === undefined || held.id === id) this.#bySession.set(session, call);
    else this.#bySession.set(session, new Map<JsonRpcId, Call>().set(held.id!, held).set(id, call));
  }

  /** The call of `session` with request id `id`, if it is in flight. */
  get(session: string, id: JsonRpcId): Call | undefined {
    const held = this.#bySession.get(session);
    if (held instanceof Map) return held.get(id);
    return held?.id === id ? held : undefined;
  }

  /** Forgets `call`, unless a later call of its id took its place. */
  delete(session: string, id: JsonRpcId, call: Call): void {
    const held = this.#bySession.get(session);
    if (held === call) this.#bySession.delete(session);
    else if (held instanceof Map && held.get(id) === call) {
      held.delete(id);
      if (held.size === 0) this.#bySession.delete(session);
    }
  }

  /** How many sessions have calls in flight (for tests: nothing is held once every call settled). */
  get sessions(): number {
    return this.#bySession.size;
  }
}
