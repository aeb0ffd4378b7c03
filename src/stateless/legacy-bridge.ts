/**
 * A stateless-era request (MCP 2026-07-28) to a backend of the 2025-11-25 era, through the
 * gateway's own session with it (legacy-sessions.ts; issue 15, "Bridging").
 *
 * - `server/discover` is answered from the backend's `initialize` result (discover.ts).
 * - Anything else is sent in the session as the client sent it (a 2025 server ignores the
 *   2026 `_meta` keys), less `inputResponses` and `requestState`, which are the gateway's
 *   business with the client. A session the backend lost (404) is opened again and the
 *   request sent once more.
 * - A JSON answer is made a 2026 one (answer-relay.ts). An SSE answer is one attempt of a
 *   bridged call (bridged-call.ts): a server→client request the backend sends during the call
 *   parks it (parked-calls.ts) and answers the client `input_required`; the retry continues it
 *   (bridge-resume.ts).
 * - `subscriptions/listen` is the session's GET stream, filtered and tagged (legacy-listen.ts).
 */
import type { FastifyReply } from 'fastify';
import type { BackendCaller, BackendCallHeaders, BackendResponse } from '../backends/backend.js';
import { traceHeaders } from '../backends/caller.js';
import { principalOf } from '../auth/authenticate.js';
import type { StatelessRequest } from '../wire/stateless-request.js';
import { relayStatelessAnswer } from './answer-relay.js';
import { BackendMessages } from '../backends/backend-messages.js';
import { parkHere } from './bridge-resume.js';
import { sendAttempt, type BridgedCall } from './bridged-call.js';
import { discoverFromInitialize } from './discover.js';
import { listenOnLegacyBackend } from './legacy-listen.js';
import type { CallInbox, StreamSession } from './legacy-streams.js';
import { legacySession, LegacySessionRefused, type LegacySession, type LegacySessionInput } from './legacy-sessions.js';
import { Lanes, type Lane } from './lanes.js';
import { SessionBudgetSpent } from './session-budget.js';
import { sendJsonRpcError } from '../http/replies.js';
import { ErrorCode, type JsonRpcId } from '../wire/jsonrpc.js';
import { sharesAnswersAcrossUsers } from './result-shaping.js';
import type { StatelessPost } from './stateless-post.js';

export interface LegacyForward extends StatelessPost {
  stateless: StatelessRequest;
  id: JsonRpcId | undefined;
  body: string;
  authorization?: string;
  /** Who calls (backends/caller.ts), as the era lookup already made it. */
  caller: BackendCaller;
}

/** The backend's answer, or 'refused' when it refused the user's token (the caller asks for a new link). */
export async function forwardToLegacyBackend(f: LegacyForward): Promise<FastifyReply | void | 'refused'> {
  const { ctx, request, reply, backend, stateless, id } = f;
  let input: LegacySessionInput = {
    ctx,
    backend,
    caller: f.caller,
    clientCapabilities: stateless.clientCapabilities,
    clientInfo: stateless.clientInfo,
    authorization: f.authorization,
    trace: traceHeaders(request),
  };
  const found = legacySession(input);
  const opened = found instanceof Promise ? await orRefused(found) : found;
  if (typeof opened === 'string') return opened === 'spent' ? budgetSpent(f) : opened;
  let session = opened;
  if (stateless.method === 'server/discover') {
    request.mcpOutcome = 'answered_by_gateway';
    return reply.code(200).type('application/json').send({ jsonrpc: '2.0', id: id ?? null, result: discoverFromInitialize(session.initialize) });
  }
  if (stateless.method === 'subscriptions/listen') return listenOnLegacyBackend(f, session, streamSession(f, input, session));
  let lane: Lane | undefined;
  if (id !== undefined && session.backendSessionId !== undefined) {
    const found = inLane(f, input, session);
    const laned = found instanceof Promise ? await found : found;
    if (laned === 'refused') return laned;
    ({ input, session, lane } = laned);
  }
  const placed = callInbox(f, input, session);
  let inbox = placed instanceof Promise ? await placed : placed;
  try {
    let res = await send(f, input, session);
    if (res.status === 404) {
      await res.body.dump();
      inbox?.release();
      const reopened = await orRefused(legacySession(input, session));
      if (typeof reopened === 'string') return reopened === 'spent' ? budgetSpent(f) : reopened;
      session = reopened;
      const replaced = callInbox(f, input, session);
      inbox = replaced instanceof Promise ? await replaced : replaced;
      res = await send(f, input, session);
    }
    if (res.status === 401 && f.authorization !== undefined) {
      await res.body.dump();
      return 'refused';
    }
    if (res.status >= 200 && res.status < 300 && res.contentType === 'text/event-stream' && id !== undefined) {
      const messages = new BackendMessages(res.body, res.contentType);
      inbox?.bind(messages);
      inbox = undefined;
      // The lane stays taken while the call runs or waits parked: until its messages close.
      if (lane) messages.onClose(lane.release);
      lane = undefined;
      const park = parkHere(ctx, { userKey: principalOf(request).userKey, endpoint: backend.name }, stateless.method, f.message.params as Record<string, unknown> | undefined);
      return sendAttempt(reply, bridgedCall(f, input, session, messages), { id, logLevel: stateless.logLevel }, park);
    }
    // Awaited, not returned: an async function returning a promise adopts it in two more turns
    // (npm run bench, issue 15), and the call keeps its place until its answer is read.
    return await relayStatelessAnswer(reply, res, { backend: backend.name, method: stateless.method, id, shared: sharesAnswersAcrossUsers(backend.config) });
  } finally {
    inbox?.release();
    lane?.release();
  }
}

/**
 * A call the backend may ask during takes a lane of its own (lanes.ts): the first session, or
 * another one opened for the lane when it has none yet. Past the user's bound of sessions, the
 * call shares the first session instead (a backend without sessions has no GET stream to share,
 * and the caller does not ask for a lane).
 */
function inLane(f: LegacyForward, first: LegacySessionInput, session: LegacySession): Laned | Promise<Laned | 'refused'> {
  const lane = lanesOf(f.ctx).take(laneKey(first));
  // The first lane costs the call no await (npm run bench).
  return lane.index === 0 ? { input: first, session, lane } : otherLane(f, first, session, lane);
}

interface Laned {
  input: LegacySessionInput;
  session: LegacySession;
  lane: Lane;
}

async function otherLane(f: LegacyForward, first: LegacySessionInput, session: LegacySession, lane: Lane): Promise<Laned | 'refused'> {
  const lanes = lanesOf(f.ctx);
  const input = { ...first, lane: lane.index };
  const other = await orRefused(legacySession(input));
  if (typeof other !== 'string') return { input, session: other, lane };
  lane.release();
  return other === 'spent' ? { input: first, session, lane: lanes.take(laneKey(first), 0) } : other;
}

/** The lanes of this gateway's calls (one per gateway: two in one process never share). */
const lanesByStreams = new WeakMap<object, Lanes>();

function lanesOf(ctx: LegacyForward['ctx']): Lanes {
  let lanes = lanesByStreams.get(ctx.legacyStreams);
  if (!lanes) lanesByStreams.set(ctx.legacyStreams, (lanes = new Lanes()));
  return lanes;
}

function laneKey(input: LegacySessionInput): string {
  return `${input.caller.principal.userKey}\n${input.backend.name}\n${JSON.stringify(input.clientCapabilities)}`;
}

/** The user holds all the sessions `stateless.maxSessionsPerUser` allows: 429 -32016, as for the 2026 era's other per-user limits. */
function budgetSpent(f: LegacyForward): FastifyReply {
  const max = f.ctx.config.stateless.maxSessionsPerUser;
  const message = `Too many sessions with 2025-era backends are open for this user (stateless.maxSessionsPerUser ${max}); they end after stateless.sessionTtl`;
  return sendJsonRpcError(f.reply, 429, ErrorCode.RateLimitedStateless, message, f.id ?? null, { limit: 'stateless.maxSessionsPerUser', max });
}

/** What `work` gives; 'refused' when the backend refused the user's token while a session was opened for it, 'spent' when the user's bound allowed no more sessions. */
function orRefused<T>(work: T | Promise<T>): Promise<T | 'refused' | 'spent'> {
  return Promise.resolve(work).catch((err: unknown) => {
    if (err instanceof LegacySessionRefused) return 'refused' as const;
    if (err instanceof SessionBudgetSpent) return 'spent' as const;
    throw err;
  });
}

/** The call's place on the session's GET stream, where SDK servers send the requests they do not relate to a call (legacy-streams.ts). */
function callInbox(f: LegacyForward, input: LegacySessionInput, session: LegacySession): CallInbox | Promise<CallInbox> | undefined {
  if (f.id === undefined || session.backendSessionId === undefined) return undefined;
  // Described only when needed: a backend with no GET stream costs the call a key and a lookup.
  return f.ctx.legacyStreams.openCall(streamKey(f, session), () => streamSession(f, input, session));
}

function streamKey(f: LegacyForward, session: LegacySession): string {
  return `${f.backend.name}\n${session.backendSessionId ?? ''}`;
}

function streamSession(f: LegacyForward, input: LegacySessionInput, session: LegacySession): StreamSession {
  const headers = headersFor(f, input, session);
  return { key: streamKey(f, session), open: () => f.backend.get(headers), respond: respondIn(f, headers) };
}

/** Sends one message of the gateway's own (an answer to the backend's request) in the session, the answer discarded. */
function respondIn(f: LegacyForward, headers: BackendCallHeaders): (message: Record<string, unknown>) => Promise<void> {
  return async (message) => {
    const res = await f.backend.post(JSON.stringify(message), headers);
    await res.body.dump();
  };
}

/** The body sent to a 2025 backend: without the 2026 multi-round-trip fields, which it would not understand. */
function legacyBody(f: LegacyForward): string {
  const params = f.message.params as Record<string, unknown> | undefined;
  if (!params || (!('inputResponses' in params) && !('requestState' in params))) return f.body;
  const { inputResponses: _responses, requestState: _state, ...rest } = params;
  void _responses, void _state;
  return JSON.stringify({ ...f.message, params: rest });
}

function send(f: LegacyForward, input: LegacySessionInput, session: LegacySession): Promise<BackendResponse> {
  return f.backend.post(legacyBody(f), headersFor(f, input, session));
}

function headersFor(f: LegacyForward, input: LegacySessionInput, session: LegacySession): BackendCallHeaders {
  return { sessionId: session.backendSessionId, protocolVersion: session.protocolVersion, authorization: f.authorization, ...input.trace, caller: input.caller };
}

function bridgedCall(f: LegacyForward, input: LegacySessionInput, session: LegacySession, messages: BackendMessages): BridgedCall {
  return {
    messages,
    userKey: principalOf(f.request).userKey,
    endpoint: f.backend.name,
    method: f.stateless.method,
    shared: sharesAnswersAcrossUsers(f.backend.config),
    clientCapabilities: f.stateless.clientCapabilities,
    respond: respondIn(f, headersFor(f, input, session)),
  };
}
