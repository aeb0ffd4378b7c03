/**
 * Which JSON-RPC requests a relayed message answers: the ids of the responses (a `result` or
 * an `error`) in it, a batch included. The relay settles its open requests with it, and a
 * resumed POST stream finds which requests it still owes (MCP 2025-11-25 "Resumability and
 * Redelivery": a stream ends once every request on it has its response). Also whether one
 * event is the whole answer to a POST ({@link answersExactly}), which both eras' relays ask
 * before they send that event as plain JSON (issue 29).
 */
import type { JsonRpcId } from '../wire/jsonrpc.js';

/** A request id as a map key: `1` and `"1"` are different requests. */
export const idKey = (id: JsonRpcId) => `${typeof id}:${id}`;

/** The keys ({@link idKey}) of the requests `data` answers; none when it is not JSON. */
export function answeredIdKeys(data: string): string[] {
  let message: unknown;
  try {
    message = JSON.parse(data);
  } catch {
    return [];
  }
  const keys: string[] = [];
  for (const m of Array.isArray(message) ? message : [message]) {
    const key = responseKey(m);
    if (key !== undefined) keys.push(key);
  }
  return keys;
}

/**
 * True when `data` (one SSE event's data) is exactly the answer to a POST whose requests were
 * `requestIds`: every message in it is a response, each request has exactly one, and no other
 * id is answered; a batch answer (an array) only to a batch POST (`batch`), one object only to
 * a single request. Only then may the relays send the event as plain `application/json`
 * (a server may answer a POST with either: MCP 2025-11-25 "Transports" §Sending Messages to the
 * Server), because the JSON body then holds what the client asked for and nothing it would
 * have to read as a stream: a notification beside the response, an answer to another request,
 * or a second answer to the same id all keep the event on a stream, relayed as it was.
 */
export function answersExactly(data: string, requestIds: readonly JsonRpcId[], batch = false): boolean {
  let message: unknown;
  try {
    message = JSON.parse(data);
  } catch {
    return false;
  }
  if (Array.isArray(message) !== batch) return false;
  const messages: unknown[] = batch ? (message as unknown[]) : [message];
  if (!requestIds.length || messages.length !== requestIds.length) return false;
  const owed = new Set(requestIds.map(idKey));
  for (const m of messages) {
    const key = responseKey(m);
    if (key === undefined || !owed.delete(key)) return false;
  }
  return true;
}

/** The {@link idKey} of a response, or undefined for a request, a notification, or anything else. */
function responseKey(m: unknown): string | undefined {
  if (!m || typeof m !== 'object' || 'method' in m || !('result' in m || 'error' in m)) return undefined;
  const id = (m as { id?: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? idKey(id) : undefined;
}
