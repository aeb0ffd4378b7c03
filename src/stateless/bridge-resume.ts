/**
 * A 2026-07-28 client's retry that answers what a 2025-11-25 backend asked during a bridged
 * call (issue 15, "Bridging"; MCP 2026-07-28 "Multi Round-Trip Requests"). Its `requestState`
 * is the gateway's own, already opened by the caller (bound to the user, the request and an
 * expiry); its purpose names the replica holding the call and the call.
 *
 * - On the holding replica: the call is taken (once), each answered input becomes the JSON-RPC
 *   response the backend waits for, and the next attempt reads on (bridged-call.ts). Inputs
 *   left unanswered are asked again, alone (MRTR: a server re-requests what is missing rather
 *   than failing).
 * - On another replica: the retry is handed to the holder over the coordinator and its answer
 *   relayed back (bridge-replicas.ts).
 * - A call that is gone (answered already, expired, its replica stopped) is -32602: the state
 *   leads nowhere, and the client starts the request again without it.
 */
import type { FastifyReply } from 'fastify';
import { principalOf } from '../auth/authenticate.js';
import { sendJsonRpcError } from '../http/replies.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import { parkRefused, sendAttempt, stoppableAttempt, type Attempt, type AttemptMessage, type BridgedCall, type Park } from './bridged-call.js';
import type { StatelessContext } from './context.js';
import { answersFrom, inputRequestsOf } from './input-requests.js';
import { abandon } from './parked-calls.js';
import type { StateBinding } from './request-state.js';

/** The purpose of a requestState that leads back to a parked call: `bridge:<replica>/<call>`. */
export const BRIDGE_PURPOSE = 'bridge:';

/** What a retry brings to the call it continues, wherever that call is held. */
export interface Continuation {
  userKey: string;
  /** The endpoint's backend name the retry came through (the one its state is bound to). */
  endpoint: string;
  parkId: string;
  method: string;
  params: Record<string, unknown>;
  attempt: Attempt;
}

export function parkPurpose(replicaId: string, parkId: string): string {
  return `${BRIDGE_PURPOSE}${replicaId}/${parkId}`;
}

export interface ParkedCallRef {
  replicaId: string;
  parkId: string;
}

/** The replica and call a purpose names, or undefined for another purpose. */
export function parkedCallOf(purpose: string): ParkedCallRef | undefined {
  if (!purpose.startsWith(BRIDGE_PURPOSE)) return undefined;
  const [replicaId, parkId] = purpose.slice(BRIDGE_PURPOSE.length).split('/');
  return replicaId && parkId ? { replicaId, parkId } : undefined;
}

/** A Park that keeps calls on this replica and seals states for this user, endpoint and request. */
export function parkHere(ctx: StatelessContext, to: StateBinding, method: string, params: Record<string, unknown> | undefined): Park {
  return (call: BridgedCall, asks) => {
    const parkId = ctx.parkedCalls.park(call, asks);
    if (parkId === undefined) return undefined;
    return ctx.requestStates.seal(to, method, params, { purpose: parkPurpose(ctx.coordinator.replicaId, parkId) });
  };
}

/** Serves the retry on this replica, whose `parkId` was opened from a state naming it. */
export async function resumeHere(ctx: StatelessContext, reply: FastifyReply, continuation: Continuation): Promise<FastifyReply> {
  const resumed = await answerParkedCall(ctx, continuation);
  if (resumed === undefined) return gone(reply, continuation.attempt.id);
  reply.request.mcpOutcome = 'answered_by_gateway';
  if ('answer' in resumed) return reply.code(resumed.status).type('application/json').send(resumed.answer);
  return sendAttempt(reply, resumed.call, continuation.attempt, resumed.park);
}

/**
 * The same, for a retry handed over by another replica: the attempt's messages as they come
 * (the client waits on the other replica), none when the call is not held here. `left` aborts
 * when that client leaves: the call is stopped (its backend stream closed) unless it parked
 * again, as sendAttempt does for a client of this replica.
 */
export async function* resumeForOtherReplica(ctx: StatelessContext, continuation: Continuation, left: AbortSignal): AsyncGenerator<AttemptMessage> {
  const resumed = await answerParkedCall(ctx, continuation);
  if (resumed === undefined) return;
  if ('answer' in resumed) {
    yield { data: resumed.answer, final: { status: resumed.status } };
    return;
  }
  const { messages, stop } = stoppableAttempt(resumed.call, continuation.attempt, resumed.park);
  if (left.aborted) stop();
  else left.addEventListener('abort', stop, { once: true });
  try {
    yield* messages;
  } finally {
    left.removeEventListener('abort', stop);
  }
}

type Resumed = { answer: string; status: number } | { call: BridgedCall; park: Park };

/** Takes the call and gives the backend the client's answers: then an answer of its own (more to ask, a failure) or the call to read on. */
async function answerParkedCall(ctx: StatelessContext, continuation: Continuation): Promise<Resumed | undefined> {
  const { userKey, endpoint, method, params, attempt } = continuation;
  const parked = ctx.parkedCalls.take(continuation.parkId, { userKey, endpoint });
  if (!parked) return undefined;
  const park = parkHere(ctx, { userKey, endpoint }, method, params);
  const { responses, unanswered } = answersFrom(parked.asks, params.inputResponses);
  try {
    await Promise.all(responses.map((response) => parked.call.respond(response)));
  } catch {
    abandon({ call: parked.call, asks: unanswered }, 'the answer could not be delivered');
    const failure = errorResponse(attempt.id, ErrorCode.BackendUnavailable, 'the backend could not be given the answers; send the request again without requestState');
    return { answer: JSON.stringify(failure), status: 502 };
  }
  if (unanswered.length === 0) return { call: parked.call, park };
  const requestState = park(parked.call, unanswered);
  if (requestState === undefined) {
    const refused = await parkRefused(parked.call, attempt, unanswered);
    parked.call.messages.close();
    return { answer: refused.data, status: refused.final!.status };
  }
  const result = { resultType: 'input_required', inputRequests: inputRequestsOf(unanswered), requestState };
  return { answer: JSON.stringify({ jsonrpc: '2.0', id: attempt.id, result }), status: 200 };
}

export function gone(reply: FastifyReply, id: JsonRpcId): FastifyReply {
  const message = 'requestState leads to a call that is no longer waiting (answered already, expired, or its gateway replica stopped); send the request again without it';
  return sendJsonRpcError(reply, 200, ErrorCode.InvalidParams, message, id);
}
