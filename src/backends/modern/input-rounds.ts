/**
 * One request of a 2025-11-25 client to a 2026-07-28 backend that may need the client's input
 * (MCP 2026-07-28 "Multi Round-Trip Requests"; issue 15, "Bridging: 2025-11-25 client → 2026
 * backend"), as the SSE answer the client's session expects:
 *
 * - the backend's notifications pass as they come (progress, the log messages `_meta` asked for);
 * - an `input_required` result becomes real server→client requests on this stream —
 *   elicitation, sampling, roots, each under an id of the gateway's (input-answers.ts) — and,
 *   once the client answered them all, the request is sent again with `inputResponses` and the
 *   backend's `requestState`, as a new request with a new id (SEP-2322), as the revision's
 *   client would;
 * - the final response answers the client's request under its own id, without the members
 *   the client's revision does not have (`resultType`, the cache hints).
 *
 * A client that refuses a request or does not answer in time gets an error for its call; so
 * does a backend that keeps asking past {@link MAX_ROUNDS}. The client leaving (its stream
 * closed) ends the round it waits in.
 */
import { randomUUID } from 'node:crypto';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backend.js';
import { BackendMessages, parseObject, type BackendMessage } from '../backend-messages.js';
import { syntheticBody } from '../body.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../../wire/jsonrpc.js';
import { withoutRevisionMembers } from '../../wire/result-type.js';
import { formatSseEvent } from '../../wire/sse.js';
import type { Asked, InputAnswers } from './input-answers.js';
import { untilAborted } from '../abortable.js';

/**
 * An input request's params as a 2025-11-25 client must find them: a URL-mode elicitation
 * carries an `elicitationId` there (client/elicitation §URL Mode, required by the schema),
 * which the 2026 revision dropped; the gateway names one. No `notifications/elicitation/complete`
 * follows it: the retry with the client's answer is what the 2026 backend waits for.
 */
function asSessionEra(method: unknown, params: unknown): Record<string, unknown> {
  const given = (params ?? {}) as Record<string, unknown>;
  if (method !== 'elicitation/create' || given.mode !== 'url' || typeof given.elicitationId === 'string') return given;
  return { ...given, elicitationId: randomUUID() };
}

/** A backend asking more often than this for one request is not converging. */
export const MAX_ROUNDS = 8;

export interface Conversation {
  backend: McpBackend;
  answers: InputAnswers;
  /** The session (and user) the input requests go to: the only one whose answers count. */
  asked: Asked;
  /** The request as sent to the backend (with its `_meta`), and its headers. */
  request: BackendMessage & { id: JsonRpcId };
  headers: BackendCallHeaders;
  /** The client's request's signal: aborted when the client leaves or the gateway stops. */
  signal?: AbortSignal;
  /** The final answer edited for the client before it goes (a `tools/list` without the tools it must not see: tool-headers.ts). */
  shape?: (message: BackendMessage) => BackendMessage;
}

/** The first answer: a JSON message already read, or an answer (SSE, or JSON messages as they come) still to read. */
export type FirstAnswer = { message: BackendMessage } | { res: BackendResponse };

export function converse(conversation: Conversation, first: FirstAnswer): BackendResponse {
  const ended = new AbortController();
  const body = syntheticBody(conversationEvents(conversation, first, ended.signal));
  // A synthetic body is a Readable: destroyed when the client's stream closes.
  (body as unknown as NodeJS.EventEmitter).once('close', () => ended.abort());
  conversation.signal?.addEventListener('abort', () => ended.abort(), { once: true });
  return { status: 200, headers: {}, contentType: 'text/event-stream', body };
}

async function* conversationEvents(c: Conversation, first: FirstAnswer, ended: AbortSignal): AsyncGenerator<string> {
  const id = c.request.id;
  let answer: FirstAnswer = first;
  for (let round = 0; ; round++) {
    let final: BackendMessage | undefined;
    let broken: Error | undefined;
    if ('message' in answer) final = answer.message;
    else for await (const message of messagesOf(answer.res, (why) => (broken = why))) {
      if (message.method === undefined) {
        final = message;
        break;
      }
      // A 2026 server sends no requests on a response stream; notifications pass.
      if (message.id === undefined) yield formatSseEvent(JSON.stringify(message));
    }
    const result = final?.result as Record<string, unknown> | undefined;
    if (!final) return yield (round === 0 ? answerFailure : failure)(id, broken?.message ?? 'the backend ended its answer without a result');
    // The client's own id, and only the members its revision has (issue 42 §10).
    if (result?.resultType !== 'input_required') return yield formatSseEvent(JSON.stringify(withoutRevisionMembers(shaped(c, { ...final, id }), c.request.method)));
    if (round >= MAX_ROUNDS) return yield failure(id, `the backend asked for input more than ${MAX_ROUNDS} times`);
    const inputRequests = (result.inputRequests ?? {}) as Record<string, { method?: unknown; params?: unknown }>;
    const asked = c.answers.open(Object.keys(inputRequests), c.asked);
    let responses: Record<string, unknown>;
    try {
      for (const [key, ask] of Object.entries(inputRequests)) {
        yield formatSseEvent(JSON.stringify({ jsonrpc: '2.0', id: asked.ids.get(key), method: ask.method, params: asSessionEra(ask.method, ask.params) }));
      }
      responses = await untilAborted(asked.answers, ended);
    } catch (err) {
      return yield failure(id, (err as Error).message);
    } finally {
      asked.close();
    }
    answer = await retry(c, responses, result.requestState);
  }
}

/**
 * The request again, with the client's answers and the backend's state (MRTR §Client
 * Requirements), as a new JSON-RPC request under an id of its own (SEP-2322: the earlier
 * request has been answered, so its id is spent). The client still gets the final answer
 * under its own id: {@link conversationEvents} writes it over whatever id the backend used.
 */
async function retry(c: Conversation, inputResponses: Record<string, unknown>, requestState: unknown): Promise<FirstAnswer> {
  const params = { ...(c.request.params as Record<string, unknown>), inputResponses, ...(typeof requestState === 'string' ? { requestState } : {}) };
  const res = await c.backend.post(JSON.stringify({ ...c.request, id: retryId(), params }), c.headers, c.signal);
  // SSE, or JSON read message by message: one message, or progress then the result as JSON lines (issue 29).
  if ((res.contentType === 'text/event-stream' || res.contentType === 'application/json') && res.status === 200) return { res };
  const message = parseObject(await res.body.text());
  if (message && ('result' in message || 'error' in message)) return { message };
  return { message: errorResponse(c.request.id, ErrorCode.BackendUnavailable, `backend "${c.backend.name}" answered HTTP ${res.status}`) as unknown as BackendMessage };
}

/** A retry's id: never one the client or an earlier round used (the gateway's own, as its input requests' ids are). */
function retryId(): string {
  return `switchboard-retry-${randomUUID()}`;
}

/** The answer's messages (SSE or JSON, by its content type); `failed` is told why they ended early (a message past the bound). */
async function* messagesOf(res: BackendResponse, failed: (why: Error) => void): AsyncGenerator<BackendMessage> {
  const messages = new BackendMessages(res.body, res.contentType);
  try {
    for (let message = await messages.next(); message; message = await messages.next()) yield message;
    if (messages.failure) failed(messages.failure);
  } finally {
    messages.close();
  }
}

function shaped(c: Conversation, message: BackendMessage): BackendMessage {
  return c.shape ? c.shape(message) : message;
}

/** The first answer failed before any input was asked: an error of the backend's answer, not of the input rounds. */
function answerFailure(id: JsonRpcId, why: string): string {
  return formatSseEvent(JSON.stringify(errorResponse(id, ErrorCode.InternalError, `The backend's answer could not be relayed: ${why}`)));
}

function failure(id: JsonRpcId, why: string): string {
  return formatSseEvent(JSON.stringify(errorResponse(id, ErrorCode.InternalError, `The request needed the client's input and could not go on: ${why}`)));
}
