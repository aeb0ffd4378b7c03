/**
 * One attempt of a 2026-07-28 client at a call bridged to a 2025-11-25 backend: the backend's
 * SSE answer read up to its end or up to the next question it asks the client (issue 15,
 * "Bridging: 2026 client → 2025-11-25 backend"; MCP 2026-07-28 "Multi Round-Trip Requests").
 *
 * - Notifications reach the client as they come; log messages only when the attempt's `_meta`
 *   asked for a level and at or above it (2026-07-28 "Logging").
 * - Server→client requests (input-requests.ts) are gathered while the backend sends them
 *   together (within {@link SETTLE_MS} of each other: `Promise.all` of several asks arrives
 *   in one burst), then the call is parked and the attempt ends with an `input_required`
 *   result whose `requestState` names the parked call. The retry answers the backend's
 *   requests and runs the next attempt on the same backend stream.
 * - A request for a capability the client did not declare ends the call: the client gets
 *   -32021 with `requiredCapabilities`, the backend an error for its request.
 * - The backend's final response answers the attempt, under the attempt's own id (a retry
 *   is a new JSON-RPC request), with its result made a 2026 one.
 * - The client closing an attempt's stream cancels the call, unless it was parked.
 */
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import { LOG_LEVELS } from '../wire/revision-2026.js';
import { formatSseEvent, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import type { BackendMessage, BackendMessages } from '../backends/backend-messages.js';
import { abandoned, inputRequestsOf, judgeServerRequest, type PendingAsk } from './input-requests.js';
import { shapeMessage } from './result-shaping.js';

/** How long the bridge waits for another request of the same burst before asking the client (the session's GET stream, maybe read on another replica, lags the call's own). */
export const SETTLE_MS = 50;

/** A backend call in progress, in the gateway's own session with the backend. */
export interface BridgedCall {
  readonly messages: BackendMessages;
  /** Whose call it is: only this user's retry may continue it. */
  readonly userKey: string;
  /** The endpoint's backend name it was made through: only a retry through that endpoint (admitted by its access rules) may continue it. */
  readonly endpoint: string;
  /** The client's method (what shapes the result). */
  readonly method: string;
  /** Whether the backend's `"public"` cache scope may stand (result-shaping.ts). */
  readonly shared: boolean;
  /** The capabilities the call's session was opened with (the first attempt's `_meta`). */
  readonly clientCapabilities: Record<string, unknown>;
  /** Sends one JSON-RPC response to the backend in the call's session. */
  respond(message: BackendMessage): Promise<void>;
}

/** One HTTP request of the client in the call: the first, or a retry. */
export interface Attempt {
  id: JsonRpcId;
  logLevel?: string;
}

/** Parks the call with the requests it waits on; returns the `requestState` that leads back to it, or undefined when its user may park no more (`stateless.maxParkedPerUser`). */
export type Park = (call: BridgedCall, asks: PendingAsk[]) => string | undefined;

/** One message of an attempt; the `final` one is its answer (with the HTTP status it takes when it is the only one). */
export interface AttemptMessage {
  data: string;
  final?: { status: number };
}

const OK = { status: 200 };
/** MCP 2026-07-28 answers -32021 with HTTP 400 (Transports §Server Validation). */
const CAPABILITY_MISSING = { status: 400 };
/** A per-user bound, answered as the 2026 era's other ones: HTTP 429, -32016. */
const TOO_MANY_PARKED = { status: 429 };

/**
 * The answer to an attempt whose call could not be parked: its user has `stateless.maxParkedPerUser`
 * calls waiting for input already (issue 28 §5). The backend's requests get an error first, so
 * its handler ends rather than wait.
 */
export async function parkRefused(call: BridgedCall, attempt: Attempt, asks: PendingAsk[]): Promise<AttemptMessage> {
  await Promise.allSettled(asks.map((ask) => call.respond(abandoned(ask, 'the client has too many calls waiting for input'))));
  const message = "Too many of this user's calls wait for the client's input (stateless.maxParkedPerUser); answer or abandon one, then call again";
  return { data: JSON.stringify(errorResponse(attempt.id, ErrorCode.RateLimitedStateless, message, { limit: 'stateless.maxParkedPerUser' })), final: TOO_MANY_PARKED };
}

/** The attempt as JSON-RPC messages, the last being the attempt's answer. */
async function* attemptMessages(call: BridgedCall, attempt: Attempt, park: Park): AsyncGenerator<AttemptMessage> {
  let parked = false;
  try {
    for (;;) {
      const message = await call.messages.next();
      if (!message || message.method === undefined) {
        yield answerOf(call, attempt, message);
        return;
      }
      if (message.id === undefined) {
        if (keepNotification(message, attempt)) yield { data: JSON.stringify(message) };
        continue;
      }
      const outcome = yield* gatherAsks(call, attempt, message);
      if (!Array.isArray(outcome)) {
        yield outcome;
        return;
      }
      if (outcome.length === 0) continue;
      const requestState = park(call, outcome);
      if (requestState === undefined) {
        yield await parkRefused(call, attempt, outcome);
        return;
      }
      parked = true;
      const result = { resultType: 'input_required', inputRequests: inputRequestsOf(outcome), requestState };
      yield { data: JSON.stringify({ jsonrpc: '2.0', id: attempt.id, result }), final: OK };
      return;
    }
  } finally {
    if (!parked) call.messages.close();
  }
}

/**
 * The requests of one burst, starting with `first`: the asks to put to the client, or the
 * attempt's final answer as text when the call cannot go on (a capability missing, the
 * backend's final response arriving within the burst).
 */
async function* gatherAsks(call: BridgedCall, attempt: Attempt, first: BackendMessage): AsyncGenerator<AttemptMessage, PendingAsk[] | AttemptMessage> {
  const asks: PendingAsk[] = [];
  let next: BackendMessage | undefined | 'quiet' = first;
  while (next !== 'quiet') {
    if (next === undefined || next.method === undefined) return answerOf(call, attempt, next);
    if (next.id === undefined) {
      if (keepNotification(next, attempt)) yield { data: JSON.stringify(next) };
    } else {
      const verdict = judgeServerRequest(next, call.clientCapabilities, new Set(asks.map((ask) => ask.key)));
      if (verdict.kind === 'missing') {
        const refusal = errorResponse(next.id as JsonRpcId, ErrorCode.MissingRequiredClientCapability, 'the client did not declare this capability') as unknown as BackendMessage;
        await Promise.allSettled([call.respond(refusal), ...asks.map((ask) => call.respond(abandoned(ask, 'the call was refused')))]);
        const message = `The backend asked for a client capability this request did not declare: ${JSON.stringify(verdict.required)}`;
        return { data: JSON.stringify(errorResponse(attempt.id, ErrorCode.MissingRequiredClientCapability, message, { requiredCapabilities: verdict.required })), final: CAPABILITY_MISSING };
      }
      if (verdict.kind === 'answer') await call.respond(verdict.response).catch(() => {});
      else asks.push(verdict.ask);
    }
    next = await call.messages.nextWithin(SETTLE_MS);
  }
  return asks;
}

/** The backend's final response under the attempt's id, made a 2026 one; or the failure of a stream that ended without one. */
function answerOf(call: BridgedCall, attempt: Attempt, response: BackendMessage | undefined): AttemptMessage {
  if (!response) return { data: JSON.stringify(errorResponse(attempt.id, ErrorCode.InternalError, 'the backend ended its answer without a result')), final: OK };
  return { data: JSON.stringify(shapeMessage({ ...response, id: attempt.id }, call.method, call.shared)), final: OK };
}

function keepNotification(message: BackendMessage, attempt: Attempt): boolean {
  if (message.method !== 'notifications/message') return true;
  const levels: readonly string[] = LOG_LEVELS;
  const asked = levels.indexOf(attempt.logLevel ?? '');
  const level = levels.indexOf(String((message.params as Record<string, unknown> | undefined)?.level));
  return asked >= 0 && level >= asked;
}

/**
 * The attempt's messages, and how to stop the call when its client leaves: the backend's
 * stream closed — unless the call parked, for then it waits for the client's retry.
 */
export function stoppableAttempt(call: BridgedCall, attempt: Attempt, park: Park): { messages: AsyncGenerator<AttemptMessage>; stop(): void } {
  let parked = false;
  const messages = attemptMessages(call, attempt, (parking, asks) => {
    const state = park(parking, asks);
    parked = state !== undefined;
    return state;
  });
  return {
    messages,
    stop: () => {
      if (!parked) call.messages.close();
    },
  };
}

/**
 * Sends the attempt to the client: as JSON when its first message is its answer (so -32021
 * keeps its HTTP 400), else as an SSE stream that starts with that message. The client leaving
 * cancels the call, unless it was parked: the response's `close`, since a generator waiting on
 * a silent backend would only see its end at the backend's next message.
 */
export async function sendAttempt(reply: FastifyReply, call: BridgedCall, attempt: Attempt, park: Park): Promise<FastifyReply> {
  const { messages, stop } = stoppableAttempt(call, attempt, park);
  const cancel = () => {
    if (!reply.raw.writableFinished) stop();
  };
  reply.raw.once('close', cancel);
  const first = await messages.next();
  if (first.done || first.value.final) {
    reply.raw.off('close', cancel);
    // Ends the generator, whose `finally` closes the backend's stream unless the call parked.
    await messages.return(undefined);
    const answer = first.done ? answerOf(call, attempt, undefined) : first.value;
    return reply.code(answer.final!.status).type('application/json').send(answer.data);
  }
  const body = Readable.from(
    (async function* () {
      yield formatSseEvent(first.value.data);
      for await (const message of messages) yield formatSseEvent(message.data);
    })(),
    { objectMode: false },
  );
  body.once('close', () => reply.raw.off('close', cancel));
  return reply
    .code(200)
    .headers(SSE_RESPONSE_HEADERS)
    .send(body);
}
