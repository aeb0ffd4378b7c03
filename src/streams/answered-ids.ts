/**
 * Which JSON-RPC requests a relayed message answers: the ids of the responses (a `result` or
 * an `error`) in it, a batch included. The relay settles its open requests with it, and a
 * resumed POST stream finds which requests it still owes (MCP 2025-11-25 "Resumability and
 * Redelivery": a stream ends once every request on it has its response). Also whether one
 * event is the whole answer to a POST ({@link answersExactly}), which both eras' relays ask
 * before they send that event as plain JSON (issue 29).
 */
import type { JsonRpcId } from '../wire/jsonrpc.js';
import { objectMembers, skipSpace } from '../wire/json-scan.js';
import { CLOSE_BRACE, indexOrEnd, OPEN_BRACE } from '../wire/json-guard.js';

const NO_KEYS: readonly string[] = Object.freeze([]);

/** A request id as a map key: `1` and `"1"` are different requests. */
export const idKey = (id: JsonRpcId) => `${typeof id}:${id}`;

/**
 * The keys ({@link idKey}) of the requests `data` answers; none when it is not JSON. A single
 * object whose top-level members show it answers nothing — it has a `method` (a notification
 * such as progress, or a server request), or neither `result` nor `error` — is told by a scan,
 * not a parse: the parse could only reach the same verdict (issue 29: the events before an
 * answer were each parsed in full).
 */
export function answeredIdKeys(data: string): readonly string[] {
  const open = skipSpace(data, 0);
  if (data.charCodeAt(open) === OPEN_BRACE) {
    const members = topLevelMembers(data, open);
    if (members && (members.method || !members.outcome)) return NO_KEYS;
  }
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
  // The usual case, one request answered by one object, is read without parsing the answer
  // (a tool result can be large; issue 29); what the scan cannot tell is parsed.
  if (!batch && requestIds.length === 1) {
    const verdict = answersOneScanned(data, requestIds[0]!);
    if (verdict !== undefined) return verdict;
  }
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

/** The top-level members of a one-object answer that decide whether it is a response. */
interface ResponseMembers {
  /** Where the last `id` member's value starts. */
  id?: number;
  method: boolean;
  /** A `result` or an `error`. */
  outcome: boolean;
  /** A member name spelled with an escape: only a parse can tell which member it is. */
  escaped: boolean;
}

/**
 * {@link answersExactly} for one request, read without parsing: true when `data` is one object
 * with a `result` or an `error`, no `method`, and `id` equal to `id`; false when it is one object
 * that is not that; undefined when the scan cannot tell (not one object, a member name spelled
 * with escapes, an id written otherwise than JSON.stringify writes it) and the text must be parsed.
 * Duplicate names count as JSON.parse counts them: the last one.
 */
function answersOneScanned(data: string, id: JsonRpcId): boolean | undefined {
  const open = skipSpace(data, 0);
  if (data.charCodeAt(open) !== OPEN_BRACE) return undefined;
  const members = topLevelMembers(data, open);
  if (!members) return undefined;
  if (members.method || !members.outcome || members.id === undefined) return false;
  const expected = JSON.stringify(id);
  return data.startsWith(expected, members.id) && isValueEnd(data.charCodeAt(skipSpace(data, members.id + expected.length))) ? true : undefined;
}

const COMMA = 0x2c;

/** A value that ends where `code` stands: at the next member or the object's end. */
function isValueEnd(code: number): boolean {
  return code === COMMA || code === CLOSE_BRACE;
}

/**
 * The members of the object opening at `open` that make it a response; undefined when the
 * object does not close, something follows it, or a member name holds an escape.
 */
function topLevelMembers(text: string, open: number): ResponseMembers | undefined {
  const found: ResponseMembers = { method: false, outcome: false, escaped: false };
  const named = (start: number, end: number, name: string) => end - start === name.length && text.startsWith(name, start);
  /** The first backslash at or after the latest name (the text's length: none), searched again only once passed. */
  let backslash = -1;
  const close = objectMembers(text, open, (start, end, value) => {
    if (backslash < start) backslash = indexOrEnd(text, '\\', start);
    if (backslash < end) found.escaped = true;
    else if (named(start, end, 'id')) found.id = value;
    else if (named(start, end, 'method')) found.method = true;
    else if (named(start, end, 'result') || named(start, end, 'error')) found.outcome = true;
  });
  if (close === undefined || found.escaped || skipSpace(text, close + 1) !== text.length) return undefined;
  return found;
}
