/**
 * A backend's answer that the gateway judges or edits (pinning's `tools/list`, the tool policy
 * and the CEL rules' lists, the aggregated lists, the catalog's lists, a member's answer to a call
 * the aggregated endpoint rewrites), read strictly — issue 41 §1. Whatever the
 * gateway judges must be exactly what the client will take, so an answer the gateway cannot
 * read the way every client reads it is refused, never relayed as it came:
 *
 * - the body: one JSON value (application/json) or SSE events each holding one (MCP 2025-11-25
 *   "Transports" §Sending Messages to the Server); no byte-order mark before it (`JSON.parse`
 *   throws on one, `fetch().json()` strips it); no object with two members of one name and no
 *   nesting past {@link MAX_JSON_DEPTH} (wire/json-guard.ts: parsers differ on which name wins);
 *   an array only when the client's POST was a batch (JSON-RPC 2.0 §6);
 * - the responses: each carries exactly an id the POST sent, type included (`"1"` is not `1`,
 *   though the v1 SDK client matches ids by `Number(id)`); none twice; a judged request's
 *   response at most once in the whole answer — SSE events included, so a stream cannot show
 *   the gateway one candidate and the client another.
 *
 * Notifications and server→client requests in an SSE answer pass in order, backend event ids
 * kept. A refused answer becomes, for each request of the POST, the JSON-RPC error of a
 * backend that answered nonsense (-32010, `data.reason: "protocol"`, `data.unreadable`: why)
 * under the client's own id, in the answer's own framing. Reading is whole and bounded
 * ({@link MAX_MESSAGE_BYTES}); only answers with something to judge come here.
 */
import type { BackendResponse } from './backend.js';
import { MAX_MESSAGE_BYTES } from './backend-messages.js';
import { bytesWithin, syntheticBody } from './body.js';
import { BackendError } from './errors.js';
import { jsonShapeProblem } from '../wire/json-guard.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';
import { createSseReader, formatSseEvent } from '../wire/sse.js';

/** A request id as a map key: `1` and `"1"` are different requests. */
export const idKey = (id: JsonRpcId) => `${typeof id}:${id}`;

/** What the answer must hold. */
export interface StrictExpectation {
  /** The requests whose responses are judged or edited (exact ids). */
  judged: readonly JsonRpcId[];
  /** Every request id of the POST, judged ones included: the only ids a response may carry. */
  sent: readonly JsonRpcId[];
  /** Whether the POST was a batch: only then may the answer hold an array. */
  batch: boolean;
}

/** One part of the answer: the JSON body, or one SSE event (`value` undefined for a priming event). */
interface Part {
  data: string;
  id?: string;
  value?: unknown;
}

/** A readable answer: its parts in order, and the response to each judged request (by {@link idKey}). */
export interface StrictAnswer {
  readonly sse: boolean;
  readonly parts: readonly Part[];
  readonly responses: ReadonlyMap<string, JsonRpcMessage>;
}

/**
 * Why an answer cannot be judged, and the responses in it a lenient client could take for a
 * judged request (BOM skipped, ids compared loosely): what pinning still looks at, so a change
 * sent in a refused answer is recorded as pending all the same (its calls then held or blocked).
 */
export type Unreadable = { unreadable: string; candidates: readonly JsonRpcMessage[] };

const BOM = [0xef, 0xbb, 0xbf];

/** Whether `bytes` open with a UTF-8 byte-order mark (refused before a body: parsers differ on it). */
export const startsWithBom = (bytes: Uint8Array) => BOM.every((b, i) => bytes[i] === b);

/** One JSON value as the strict reader takes it; throws why it is unreadable (two members of one name, too deep, not JSON). */
export function parseStrictly(data: string): unknown {
  const problem = jsonShapeProblem(data);
  if (problem) throw new Error(problem.kind === 'depth' ? 'JSON nested too deep' : `an object with two members "${problem.name}"`);
  try {
    return JSON.parse(data);
  } catch {
    throw new Error('a body that is not JSON');
  }
}

/**
 * The rules for the messages of one answer, applied value by value in the order they came (a
 * stream may be judged event by event, as the aggregated endpoint does with a call's answer):
 * each call checks one JSON value (a body, or one event's data), throws why it is unreadable,
 * and returns the responses in it to judged requests.
 */
export function answerChecker(expect: StrictExpectation): (value: unknown) => JsonRpcMessage[] {
  const sent = new Map(expect.sent.map((id) => [idKey(id), id]));
  const judged = new Set(expect.judged.map(idKey));
  const seen = new Set<string>();
  return (value) => {
    const found: JsonRpcMessage[] = [];
    if (Array.isArray(value) && !expect.batch) throw new Error('a batch answering a single request');
    for (const m of Array.isArray(value) ? value : [value]) {
      if (!m || typeof m !== 'object' || Array.isArray(m)) throw new Error('a message that is not a JSON object');
      const msg = m as JsonRpcMessage;
      if (typeof msg.method === 'string') continue; // a notification or a server→client request
      if ('method' in msg) throw new Error('a message whose method is not a string');
      const key = typeof msg.id === 'string' || typeof msg.id === 'number' ? idKey(msg.id) : undefined;
      if (key === undefined || !sent.has(key)) throw new Error(`a response to id ${JSON.stringify(msg.id) ?? 'undefined'}, which the request did not send${looselySent(msg.id, expect.sent)}`);
      if (seen.has(key)) throw new Error(`two responses to id ${JSON.stringify(msg.id)}`);
      if (!('result' in msg) === !('error' in msg)) throw new Error(`a response to id ${JSON.stringify(msg.id)} with ${'result' in msg ? 'both a result and an error' : 'neither a result nor an error'}`);
      seen.add(key);
      if (judged.has(key)) found.push(msg);
    }
    return found;
  };
}

/** Checks every message of the answer; throws why it is unreadable. */
function checkMessages(parts: readonly Part[], expect: StrictExpectation): Map<string, JsonRpcMessage> {
  const check = answerChecker(expect);
  const responses = new Map<string, JsonRpcMessage>();
  for (const { value } of parts) if (value !== undefined) for (const msg of check(value)) responses.set(idKey(msg.id as JsonRpcId), msg);
  return responses;
}

/** ", though it matches id 1 loosely" when `id` reads as one of `sent` to a client that compares loosely. */
function looselySent(id: unknown, sent: readonly JsonRpcId[]): string {
  const match = sent.find((s) => loosely(s, id));
  return match === undefined ? '' : ` (it matches id ${JSON.stringify(match)} loosely)`;
}

/** Reads the whole answer and checks it; the answer or why it is unreadable. */
export async function readStrictAnswer(res: BackendResponse, expect: StrictExpectation): Promise<StrictAnswer | Unreadable> {
  const sse = res.contentType === 'text/event-stream';
  if (!sse && res.contentType !== 'application/json') {
    await res.body.dump().catch(() => {});
    return { unreadable: `content type "${res.contentType}"`, candidates: [] };
  }
  const bytes = await bytesWithin(res.body, MAX_MESSAGE_BYTES);
  if (!bytes) return { unreadable: `an answer over ${MAX_MESSAGE_BYTES} bytes`, candidates: [] };
  const bom = startsWithBom(bytes);
  const text = bytes.toString('utf8', bom ? BOM.length : 0);
  const parts: Part[] = [];
  if (sse) createSseReader({ onEvent: (data, id) => parts.push({ data, id }) }).feed(text);
  else parts.push({ data: text });
  const refused = (why: string): Unreadable => ({ unreadable: why, candidates: candidatesOf(parts, expect.judged) });
  if (bom) return refused('a byte-order mark before the body');
  try {
    for (const part of parts) if (!sse || part.data.trim()) part.value = parseStrictly(part.data);
    return { sse, parts, responses: checkMessages(parts, expect) };
  } catch (err) {
    return refused((err as Error).message);
  }
}

/** The results in `parts` whose ids a loose client takes for a judged request's (see {@link Unreadable}). */
function candidatesOf(parts: readonly Part[], judged: readonly JsonRpcId[]): JsonRpcMessage[] {
  const found: JsonRpcMessage[] = [];
  for (const { data } of parts) {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      continue;
    }
    for (const m of [value].flat()) {
      const msg = m as JsonRpcMessage | null;
      if (msg && typeof msg === 'object' && msg.method === undefined && 'result' in msg && judged.some((id) => loosely(id, msg.id))) found.push(msg);
    }
  }
  return found;
}

/** Whether a client comparing ids loosely (as strings, or as the v1 SDK does, as numbers) takes `id` for `sent`. */
const loosely = (sent: JsonRpcId, id: unknown) => String(sent) === String(id) || Number(sent) === Number(id);

/**
 * The answer as the client gets it: every message through `each` (which returns the message
 * itself when it keeps it); a part nothing changed is sent as the backend wrote it. `added`:
 * the gateway's answers to requests of a batch it kept from the backend.
 */
export function writeStrictAnswer(answer: StrictAnswer, each: (m: JsonRpcMessage) => JsonRpcMessage, added: readonly JsonRpcMessage[] = []): string {
  const out = answer.parts.map((part) => {
    let data = part.data;
    if (part.value !== undefined) {
      const value = part.value as JsonRpcMessage | JsonRpcMessage[];
      const mapped = Array.isArray(value) ? value.map(each) : each(value);
      const changed = Array.isArray(value) ? (mapped as JsonRpcMessage[]).some((m, i) => m !== value[i]) : mapped !== value;
      // The gateway's own answers join a JSON body (an array then); on a stream they go first, as events.
      if (!answer.sse && added.length) data = JSON.stringify([mapped, ...added].flat());
      else if (changed) data = JSON.stringify(mapped);
    }
    return answer.sse ? formatSseEvent(data, part.id) : data;
  });
  return (answer.sse ? added.map((m) => formatSseEvent(JSON.stringify(m))) : []).concat(out).join('');
}

/** The error each request of the POST gets for an answer refused unread: -32010 naming the backend and why. */
export function unreadableError(backend: string, why: string): BackendError {
  return new BackendError(backend, 'protocol', `backend "${backend}" sent an answer the gateway cannot judge (${why}); refused, not relayed`, undefined, { unreadable: why });
}

/** What edits an answer: how each message is sent, decided once the answer is read (judging may read the store). */
export interface StrictEdit extends StrictExpectation {
  backend: string;
  edit(answer: StrictAnswer): Promise<(m: JsonRpcMessage) => JsonRpcMessage> | ((m: JsonRpcMessage) => JsonRpcMessage);
  /** The gateway's answers to requests it kept from the backend (a batch's refused calls); sent either way. */
  added?: readonly JsonRpcMessage[];
  /** Told once when the answer is refused (a log line, a metric). */
  refused(error: BackendError): void;
  /** Looks at the candidates of a refused answer before the refusal is sent (pinning records their changes). */
  inspect?(candidates: readonly JsonRpcMessage[]): Promise<void>;
}

/**
 * `res` read strictly, then edited, or refused with {@link unreadableError} for every request
 * of the POST. Synchronous: the body is read when the client's relay reads it, so a non-2xx
 * answer and the status stay as they were; an SSE answer stays SSE (the errors as events).
 */
export function editStrictly(res: BackendResponse, spec: StrictEdit): BackendResponse {
  if (res.status < 200 || res.status >= 300 || res.status === 202) return res;
  const sse = res.contentType === 'text/event-stream';
  const headers: BackendResponse['headers'] = { ...res.headers, 'content-type': sse ? res.headers['content-type'] : 'application/json' };
  delete headers['content-length'];
  async function* body(): AsyncGenerator<string> {
    const answer = await readStrictAnswer(res, spec);
    if ('unreadable' in answer) {
      const error = unreadableError(spec.backend, answer.unreadable);
      spec.refused(error);
      if (answer.candidates.length) await spec.inspect?.(answer.candidates);
      const errors = [...spec.sent.map((id) => error.rpcError(id)), ...(spec.added ?? [])];
      yield sse ? errors.map((e) => formatSseEvent(JSON.stringify(e))).join('') : JSON.stringify(spec.batch || errors.length > 1 ? errors : errors[0]);
      return;
    }
    yield writeStrictAnswer(answer, await spec.edit(answer), spec.added);
  }
  return { ...res, headers, contentType: sse ? res.contentType : 'application/json', body: syntheticBody(body()) };
}
