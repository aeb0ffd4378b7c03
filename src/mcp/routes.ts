/**
 * The client-facing Streamable HTTP endpoint for one backend: `POST/GET/DELETE
 * /mcp/{backend}` (SPEC §2; MCP 2025-11-25 "Transports"). Thin Fastify adapter: checks the
 * HTTP-level rules, finds the user's session, and hands the bytes to the backend client and
 * the stream relay. Message bodies are forwarded as received.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { BackendError } from '../backends/errors.js';
import type { BackendResponse, McpBackend } from '../backends/backend.js';
import { callerOf, traceHeaders } from '../backends/caller.js';
import type { SessionRecord } from '../state/store.js';
import type { McpContext } from './context.js';
import { handleInitialize } from './initialize.js';
import { ErrorCode, InvalidMessageError, isBatchText, isRequest, parseMessages, requestIdsOf, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { accepts, allowsBatch, HEADER, isSupportedVersion } from '../wire/protocol.js';
import { headersOf, headerValue } from '../wire/headers.js';
import { topParamsName } from '../wire/json-guard.js';
import { heldChunks, holdAnswer } from '../backends/held-answer.js';
import { eventDataOf } from '../wire/sse.js';
import { completeAnswerEvents, sendCompleteStream } from './complete-stream.js';
import { answersExactly } from '../streams/answered-ids.js';
import { sendBackendError, sendJsonRpcError, sendSessionNotFound, sendStateUnavailable } from '../http/replies.js';
import { StateUnavailableError } from '../state/errors.js';
import { backendRefused, passUpstreamGate, stepUp } from './upstream-gate.js';
import { firstPageList, relayRememberingList } from './remembered-lists.js';
import { keepsList } from '../linking/catalog.js';
import { endLostBackendSession, openStandaloneStream, relayPostStream, resumeStream, type StreamTarget } from './stream-service.js';
import { parseEventId } from '../streams/stream-relay.js';
import { openStandaloneEarly } from './standalone-early.js';
import { createBackendAccessGuard } from '../policy/backend-guard.js';
import { principalOf } from '../auth/authenticate.js';
import { handleStatelessPost } from '../stateless/stateless-post.js';
import { requestEra } from '../wire/revision-2026.js';

type McpRequest = FastifyRequest<{ Params: { backend?: string }; Body: string }>;

export interface McpRouteHooks {
  originGuard: onRequestHookHandler;
  authenticate: onRequestHookHandler;
}

export function registerMcpRoutes(app: FastifyInstance, ctx: McpContext, hooks: McpRouteHooks): void {
  // All run before the body is read: a foreign origin, a missing token or a backend the
  // user may not use costs us no upload.
  const options = { onRequest: [hooks.originGuard, hooks.authenticate, createBackendAccessGuard(ctx)] };
  app.post('/mcp/:backend', options, (req, reply) => handlePost(ctx, req as McpRequest, reply));
  app.get('/mcp/:backend', options, (req, reply) => handleGet(ctx, req as McpRequest, reply));
  app.delete('/mcp/:backend', options, (req, reply) => handleDelete(ctx, req as McpRequest, reply));
  // The aggregated endpoint: the same handlers, with every backend this user may use behind it.
  app.post('/mcp', options, (req, reply) => handlePost(ctx, req as McpRequest, reply));
  app.get('/mcp', options, (req, reply) => handleGet(ctx, req as McpRequest, reply));
  app.delete('/mcp', options, (req, reply) => handleDelete(ctx, req as McpRequest, reply));
}

/** The backend a request addresses: `/mcp/{backend}` (a backend or a virtual server), or the aggregated backend for `/mcp`. */
function backendOf(ctx: McpContext, request: McpRequest): McpBackend | undefined {
  const name = request.params.backend;
  return name === undefined ? ctx.aggregate : (ctx.backends.get(name) ?? ctx.virtualServers.get(name));
}

async function handlePost(ctx: McpContext, request: McpRequest, reply: FastifyReply) {
  const backend = backendOf(ctx, request);
  if (!backend) return sendJsonRpcError(reply, 404, ErrorCode.InvalidRequest, `No backend named "${request.params.backend}"`);
  const headers = headersOf(request);
  const accept = headers.accept;
  if (!accepts(accept, 'application/json') || !accepts(accept, 'text/event-stream')) {
    return sendJsonRpcError(reply, 406, ErrorCode.InvalidRequest, 'Not Acceptable: Accept must list application/json and text/event-stream');
  }
  const body = request.body;
  if (typeof body !== 'string') {
    return sendJsonRpcError(reply, 415, ErrorCode.InvalidRequest, 'Unsupported Media Type: Content-Type must be application/json');
  }
  const version = headerValue(headers[HEADER.protocolVersion]);
  let messages: JsonRpcMessage[];
  try {
    // Without a header the session's negotiated revision decides (checked after the lookup).
    messages = parseMessages(body, version === undefined || allowsBatch(version), requestEra(version) === 'stateless');
  } catch (err) {
    if (err instanceof InvalidMessageError) return sendJsonRpcError(reply, invalidStatus(err, version), err.code, err.message, err.id ?? null);
    throw err;
  }
  // Timed until the answer is complete (for SSE: the end of the stream); the outcome is
  // what the reply helpers recorded on the request.
  const method = messages.length === 1 ? messages[0]!.method : 'batch';
  request.rpcMethod = method;
  request.rpcParsed = { text: body, messages, paramsName: topParamsName() };
  const finish = ctx.metrics.startMcpRequest(backend.name, method);
  // OpenTelemetry's SERVER span (src/telemetry/), when on; a batch (2025-03-26 only) gets none.
  const scope = messages.length === 1 ? request.server.telemetry?.server(request, messages[0]!, backend.name) : undefined;
  if (scope) request.traceScope = scope;
  try {
    // The revision decides per request: 2026-07-28 is served without a session (src/stateless/).
    if (messages.length === 1 && requestEra(version, messages[0]) === 'stateless') {
      return await handleStatelessPost({ ctx, request, reply, backend, message: messages[0]! });
    }
    return await forwardPost(ctx, request, reply, backend, messages, body);
  } finally {
    finish(request.mcpOutcome ?? 'relayed');
    scope?.end(request.mcpOutcome);
  }
}

/**
 * The status of a refused message: 400, its error without an id. A request whose params are
 * refused (issue 41 §5) is answered under its id: with 200 in the session era, as every error
 * that answers an open request (http/replies.ts), with 400 in the stateless era, as its other
 * -32602s (wire/stateless-request.ts).
 */
function invalidStatus(err: InvalidMessageError, version: string | undefined): number {
  return err.id === undefined || requestEra(version) === 'stateless' ? 400 : 200;
}

async function forwardPost(ctx: McpContext, request: McpRequest, reply: FastifyReply, backend: McpBackend, messages: JsonRpcMessage[], body: string) {
  const initialize = messages.find((m) => m.method === 'initialize');
  if (initialize) {
    if (messages.length > 1 || !isRequest(initialize)) {
      return sendJsonRpcError(reply, 400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must be sent alone, as a request');
    }
    return handleInitialize(ctx, request, reply, backend, initialize, body);
  }

  const target = await sessionTarget(ctx, request, reply, backend);
  if (!target) return reply;
  // A call in flight keeps its session from eviction under sessions.maxPerUser (issue 28 §7).
  const done = ctx.sessions.inUse(principalOf(request).userKey, target.sessionId, 'call');
  try {
    return await forwardToSession(target, messages, body);
  } finally {
    done();
  }
}

/** Forwards messages of an existing session to its backend and relays the answer. */
async function forwardToSession(target: StreamTarget, messages: JsonRpcMessage[], body: string) {
  const { ctx, request, reply, backend } = target;
  const requestIds = requestIdsOf(messages);
  const batch = isBatchText(body);
  if (batch && !allowsBatch(target.protocolVersion)) {
    return sendJsonRpcError(reply, 400, ErrorCode.InvalidRequest, 'Invalid Request: JSON-RPC batches are not supported by this protocol revision');
  }
  let t = target;
  let authorization: string | undefined;
  const linkable = Boolean(backend.config.upstreamAuth);
  if (linkable) {
    const passed = await passUpstreamGate(target, messages, batch);
    if (!passed) return reply;
    ({ target: t, authorization } = passed);
  }
  let res;
  try {
    res = await backend.post(body, { sessionId: t.session.backendSessionId, protocolVersion: t.protocolVersion, authorization, ...traceHeaders(request), caller: callerOf(request, t.sessionId, t.session.clientCapabilities) });
    if (res.refused) request.mcpOutcome = 'rejected';
  } catch (err) {
    if (err instanceof BackendError) return sendBackendError(reply, err, requestIds, batch);
    throw err;
  }
  if (res.status === 401 && linkable) {
    await res.body.dump();
    return backendRefused(t, messages, batch, authorization !== undefined, res.headers['www-authenticate']);
  }
  if (res.status === 403 && linkable && authorization !== undefined) {
    const answered = await stepUp(t, res, messages, batch);
    if (answered) return answered;
  }
  const listMethod = linkable && res.status === 200 ? firstPageList(messages) : undefined;
  const provenance = authorization ? 'user' : 'anonymous';
  if (listMethod && keepsList(backend.config, listMethod, provenance)) return relayRememberingList(t, res, listMethod, requestIds, provenance);

  if (res.status === 202) {
    await res.body.dump();
    // Server requests sent on the standalone stream must find it open from now on.
    if (messages.some((m) => m.method === 'notifications/initialized')) {
      await openStandaloneEarly(t).catch((err: Error) => request.log.warn({ err: err.message }, 'could not open the standalone stream ahead of the client'));
    }
    return reply.code(202).send();
  }
  if (res.status === 404 && t.session.backendSessionId !== undefined) {
    // The session named is gone (a 404 to a request without one says nothing of sessions).
    await res.body.dump();
    return endLostBackendSession(ctx, request, reply, backend.name, target.sessionId);
  }
  if (res.status >= 200 && res.status < 300 && res.contentType === 'text/event-stream') return relaySseAnswer(t, res, requestIds, batch, authorization);
  if (res.status >= 200 && res.status < 300 && res.contentType === 'application/json') {
    return reply.code(res.status).type('application/json').header(HEADER.sessionId, target.sessionId).send(await jsonAnswerPayload(res));
  }
  if (res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403 && res.contentType === 'application/json') {
    // The backend judged the client's message (e.g. invalid params at the HTTP level): pass it on.
    return reply.code(res.status).type('application/json').send(await jsonAnswerPayload(res));
  }
  await res.body.dump().catch(() => {});
  return sendBackendError(reply, new BackendError(backend.name, 'bad_status', `backend "${backend.name}" answered HTTP ${res.status}`, res.status), requestIds, batch);
}

/**
 * A backend's SSE answer to a POST. The usual one — the response as the only event, then the
 * end, as SDK servers answer every call by default — is answered as that message alone, in one
 * write with its length (a POST may be answered with JSON or SSE: MCP 2025-11-25 "Transports"
 * §Sending Messages to the Server): there is no stream left to resume, so nothing is logged
 * for `Last-Event-ID`. A whole answer of several events that ends with the responses — progress
 * before the result — is sent as one SSE response with its length, event ids and all, stored
 * only if the client's connection ends first (complete-stream.ts). Anything else — a stream
 * closed before its answer (SSE polling), a big or slow body — goes through the relay, with its
 * event ids and replay log (MCP 2025-11-25 §Resumability and Redelivery).
 */
async function relaySseAnswer(t: StreamTarget, res: BackendResponse, requestIds: JsonRpcId[], batch: boolean, authorization: string | undefined): Promise<void> {
  const held = await holdAnswer(res);
  if (held.whole && requestIds.length) {
    const events = eventDataOf(held.whole);
    if (events.length === 1 && answersExactly(events[0]!, requestIds, batch)) {
      t.reply.code(res.status).type('application/json').header(HEADER.sessionId, t.sessionId).send(Buffer.from(events[0]!));
      return;
    }
    // Progress, then the result, all arrived: one SSE response, no relay (complete-stream.ts).
    const answer = completeAnswerEvents(events, requestIds);
    if (answer) return sendCompleteStream(t, answer, requestIds);
  }
  await relayPostStream(t, heldChunks(held), requestIds, authorization);
}

async function handleGet(ctx: McpContext, request: McpRequest, reply: FastifyReply) {
  const backend = backendOf(ctx, request);
  if (!backend) return sendJsonRpcError(reply, 404, ErrorCode.InvalidRequest, `No backend named "${request.params.backend}"`);
  if (statelessVerbRefused(request, reply)) return reply;
  const headers = headersOf(request);
  if (!accepts(headers.accept, 'text/event-stream')) {
    return sendJsonRpcError(reply, 406, ErrorCode.InvalidRequest, 'Not Acceptable: Accept must list text/event-stream');
  }
  const target = await sessionTarget(ctx, request, reply, backend);
  if (!target) return reply;
  keepInUseWhileOpen(target);
  const lastEventId = headerValue(headers[HEADER.lastEventId]);
  if (lastEventId) {
    const position = parseEventId(lastEventId);
    if (!position) return sendJsonRpcError(reply, 400, ErrorCode.InvalidRequest, 'Bad Request: Last-Event-ID was not issued by this gateway');
    return guardState(reply, () => resumeStream(target, position.streamId, position.seq));
  }
  return guardState(reply, () => openStandaloneStream(target));
}

/**
 * A client's open stream keeps its session from eviction under `sessions.maxPerUser` until
 * its connection closes (SPEC §8 "Budgets", issue 28 §7), whichever replica evicts.
 */
function keepInUseWhileOpen(t: StreamTarget): void {
  const done = t.ctx.sessions.inUse(principalOf(t.request).userKey, t.sessionId, 'stream');
  if (t.reply.raw.closed) done();
  // `on`, not `once`: a response closes once, `done` acts once anyway, and a once-wrapper is
  // about 0.15 KiB more of every idle stream (issue 45 §3).
  else t.reply.raw.on('close', done);
}

async function handleDelete(ctx: McpContext, request: McpRequest, reply: FastifyReply) {
  const backend = backendOf(ctx, request);
  if (!backend) return sendJsonRpcError(reply, 404, ErrorCode.InvalidRequest, `No backend named "${request.params.backend}"`);
  if (statelessVerbRefused(request, reply)) return reply;
  const target = await sessionTarget(ctx, request, reply, backend);
  if (!target) return reply;
  const principal = principalOf(request);
  ctx.streams.stopSession(principal.userKey, target.sessionId);
  ctx.metrics.sessionsEnded.inc({ backend: backend.name, reason: 'deleted' });
  request.server.telemetry?.sessionEnded(target.session.createdAt, target.protocolVersion);
  if (target.session.backendSessionId) {
    try {
      const authorization = Boolean(backend.config.upstreamAuth) ? await ctx.upstream.linkedAuthorization(principal, backend.config).catch(() => undefined) : undefined;
      const res = await backend.delete({ sessionId: target.session.backendSessionId, protocolVersion: target.protocolVersion, authorization, caller: callerOf(request, target.sessionId) });
      await res.body.dump();
      if (res.status >= 400 && res.status !== 404 && res.status !== 405) request.log.warn({ status: res.status }, 'backend refused to end its session');
    } catch (err) {
      request.log.warn({ err: (err as Error).message }, 'could not end the backend session');
    }
  }
  return guardState(reply, async () => {
    await ctx.sessions.remove(principal, target.sessionId);
    request.log.info('session deleted');
    return reply.code(204).send();
  });
}

/**
 * GET and DELETE belong to sessions, which the stateless era has none of: a request of that
 * era gets 405 (MCP 2026-07-28 "Transports" §Backward Compatibility; `subscriptions/listen`
 * replaces the GET stream). True when answered.
 */
function statelessVerbRefused(request: McpRequest, reply: FastifyReply): boolean {
  if (requestEra(headerValue(headersOf(request)[HEADER.protocolVersion])) !== 'stateless') return false;
  sendJsonRpcError(reply.header('allow', 'POST'), 405, ErrorCode.InvalidRequest, 'Method Not Allowed: MCP 2026-07-28 has no sessions; POST each request (subscriptions/listen replaces the GET stream)');
  return true;
}

/**
 * What to send for a backend's JSON answer: read whole and sent in one write with its length
 * when small and quick, else piped as it comes, never held whole (backends/held-answer.ts).
 */
async function jsonAnswerPayload(res: BackendResponse): Promise<Buffer | Readable> {
  const held = await holdAnswer(res);
  return held.whole ?? Readable.from(held.stream, { objectMode: false });
}

/**
 * Validates the session header and protocol version and loads the user's session. Sends
 * the error reply and returns undefined when the request cannot proceed.
 */
async function sessionTarget(ctx: McpContext, request: McpRequest, reply: FastifyReply, backend: McpBackend): Promise<StreamTarget | undefined> {
  const headers = headersOf(request);
  const version = headerValue(headers[HEADER.protocolVersion]);
  if (version !== undefined && !isSupportedVersion(version)) {
    sendJsonRpcError(reply, 400, ErrorCode.InvalidRequest, `Bad Request: unsupported MCP-Protocol-Version "${version}"`);
    return undefined;
  }
  const sessionId = headerValue(headers[HEADER.sessionId]);
  if (!sessionId) {
    sendJsonRpcError(reply, 400, ErrorCode.InvalidRequest, 'Bad Request: Mcp-Session-Id header is required');
    return undefined;
  }
  let session: SessionRecord | undefined;
  try {
    session = await ctx.sessions.find(principalOf(request), sessionId, backend.name);
  } catch (err) {
    if (!(err instanceof StateUnavailableError)) throw err;
    request.log.error({ err: err.message }, 'state store unavailable');
    sendStateUnavailable(reply);
    return undefined;
  }
  if (!session) {
    sendSessionNotFound(reply);
    return undefined;
  }
  return { ctx, request, reply, backend, sessionId, session, protocolVersion: version ?? session.protocolVersion };
}

async function guardState<T>(reply: FastifyReply, operation: () => Promise<T>): Promise<T | FastifyReply> {
  try {
    return await operation();
  } catch (err) {
    if (err instanceof StateUnavailableError && !reply.sent && !reply.raw.headersSent) {
      reply.log.error({ err: err.message }, 'state store unavailable');
      return sendStateUnavailable(reply);
    }
    throw err;
  }
}
