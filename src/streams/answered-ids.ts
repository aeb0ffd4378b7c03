/**
 * Which JSON-RPC requests a relayed message answers: the ids of the responses (a `result` or
 * an `error`) in it, a batch included. The relay settles its open requests with it, and a
 * resumed POST stream finds which requests it still owes (MCP 2025-11-25 "Resumability and
 * Redelivery": a stream ends once every request on it has its response).
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
    if (m && typeof m === 'object' && !('method' in m) && ('result' in m || 'error' in m)) {
      const id = (m as { id?: unknown }).id;
      if (typeof id === 'string' || typeof id === 'number') keys.push(idKey(id));
    }
  }
  return keys;
}
