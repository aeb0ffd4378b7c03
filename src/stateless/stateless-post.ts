/**
 * A POST of the stateless era (MCP 2026-07-28) on `/mcp/{backend}`: no session, no
 * `initialize`; the request carries its revision and the client's capabilities in `_meta` and
 * the standard headers (issue 15, "Serving 2026-07-28 clients").
 *
 * The request is checked against its headers (wire/stateless-request.ts); a retry carrying the
 * gateway's own `requestState` is verified and stripped of what the gateway asked for
 * (request-state.ts; link-required.ts, and policy/approval-input.ts for a call a `confirm`
 * rule held); a backend with `upstreamAuth` gets the user's linked
 * token or the client an `input_required` that leads to the link; then the request goes to the
 * backend in the revision it speaks (backends/era.ts): as it is to a 2026-07-28 backend, with the
 * standard headers re-emitted; through the gateway's own session to a 2025-11-25 one
 * (legacy-bridge.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { principalOf } from '../auth/authenticate.js';
import type { McpBackend } from '../backends/backend.js';
import { callerOf, traceHeaders } from '../backends/caller.js';
import { parseObject } from '../backends/backend-messages.js';
import { syntheticBody, withBody } from '../backends/body.js';
import { BackendError } from '../backends/errors.js';
import { sendBackendError, sendJsonRpcError } from '../http/replies.js';
import { linkedAuthorization } from '../linking/linked-authorization.js';
import { encodeHeaderValue } from '../wire/header-encoding.js';
import { ErrorCode, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { STATELESS_REVISIONS } from '../wire/revision-2026.js';
import { checkStatelessRequest, type StatelessRequest } from '../wire/stateless-request.js';
import { relayStatelessAnswer } from './answer-relay.js';
import type { StatelessContext } from './context.js';
import { parkedCallOf, resumeHere, type Continuation, type ParkedCallRef } from './bridge-resume.js';
import { forwardToLegacyBackend } from './legacy-bridge.js';
import { answerUnlinkedStateless, declinedLink, LINK_INPUT_KEY } from './link-required.js';
import { APPROVAL_INPUT_KEY, approvalDeclined, approvalOfPurpose } from '../policy/approval-input.js';
import { RelayedListen } from './relayed-listen.js';
import { RequestStates } from './request-state.js';
import { sharesAnswersAcrossUsers } from './result-shaping.js';

export interface StatelessPost {
  ctx: StatelessContext;
  request: FastifyRequest;
  reply: FastifyReply;
  backend: McpBackend;
  message: JsonRpcMessage;
}

/**
 * Serves the POST; a backend failing is answered as a JSON-RPC error. One async function, its
 * own catch: each layer of them costs the call a promise and a turn (npm run bench, issue 15).
 */
export async function handleStatelessPost(post: StatelessPost, afterDowngrade = false): Promise<FastifyReply | void> {
  try {
    const { ctx, request, reply, backend, message } = post;
    const id = isRequest(message) ? message.id : undefined;
    const check = checkStatelessRequest(request.raw.rawHeaders, message, STATELESS_REVISIONS);
    if (!check.ok) return sendJsonRpcError(reply, check.problem.status, check.problem.code, check.problem.message, id ?? null, check.problem.data);
    const forward = retryToForward(post, check.request, id);
    if (forward === 'answered') return reply;
    // Awaited inside the try, like every promise returned below: its BackendError is answered here.
    if ('resume' in forward) return await resume(post, check.request, forward.resume);
    let authorization: string | undefined;
    if (backend.config.upstreamAuth) {
      const auth = await linkedAuthorization(ctx, request, reply, backend.config, id === undefined ? [] : [id], false);
      if (!auth) return reply;
      if (!auth.authorization) return await unlinked(post, check.request, id);
      authorization = auth.authorization;
    }
    // The gateway's own answers of `input_required` (a held call, issue 46) seal this request as the client sent it here.
    const caller = callerOf(request, undefined, check.request.clientCapabilities, (purpose) => ctx.requestStates.seal({ userKey: principalOf(request).userKey, endpoint: backend.name }, check.request.method, message.params as Record<string, unknown> | undefined, { purpose }));
    // Known (pinned or cached) in the common case: no await, one turn fewer per call (npm run bench).
    const era = ctx.eras.knownEra(backend) ?? (await ctx.eras.eraOf(backend, authorization, caller));
    // The backend refused the user's linked token before it would say which era it speaks: as for any call it refuses.
    if (era && 'refused' in era && authorization !== undefined) return await tokenRefused(post, check.request, id);
    if (!era?.era) {
      return sendBackendError(reply, new BackendError(backend.name, 'unreachable', `backend "${backend.name}" could not be reached to learn its protocol revision`), id === undefined ? [] : [id], false);
    }
    if (era.era !== '2026-07-28') {
      // Every field named, no `...post`: a spread of the request's objects cost a V8 inline-cache miss per call (npm run bench, issue 15).
      const bridged = await forwardToLegacyBackend({ ctx, request, reply, backend, message, stateless: check.request, id, body: forward.body, authorization, caller });
      return bridged === 'refused' ? await tokenRefused(post, check.request, id) : bridged;
    }
    let res = await backend.post(forward.body, {
      protocolVersion: check.request.protocolVersion,
      protocolHeaders: protocolHeadersOf(check.request),
      authorization,
      ...traceHeaders(request),
      caller,
    });
    if (res.status === 400 && res.contentType === 'application/json') {
      const text = await res.body.text();
      if (!afterDowngrade && refusedAsLegacy(text)) {
        // The era known for it is wrong: the backend was downgraded (basic/versioning: re-probe when the cached assumption fails).
        request.log.info({ backend: backend.name }, 'backend refused a 2026-07-28 request as an older server does; probing its era again');
        ctx.eras.forget(backend.name, authorization === undefined ? undefined : caller.principal.userKey);
        return await handleStatelessPost(post, true);
      }
      res = withBody(res, syntheticBody(text));
    }
    if (res.status === 401 && authorization !== undefined) {
      await res.body.dump();
      return await tokenRefused(post, check.request, id);
    }
    // Awaited, not returned: an async function returning a promise adopts it in two more turns (npm run bench, issue 15).
    const listen = message.method === 'subscriptions/listen' && id !== undefined ? new RelayedListen(ctx.streams.listens, { userKey: principalOf(request).userKey, endpoint: backend.name, id }) : undefined;
    return await relayStatelessAnswer(reply, res, { backend: backend.name, method: message.method!, id, shared: sharesAnswersAcrossUsers(backend.config), listen });
  } catch (err) {
    if (!(err instanceof BackendError)) throw err;
    return sendBackendError(post.reply, err, isRequest(post.message) ? [post.message.id] : [], false);
  }
}

/** The standard request headers toward the backend (Transports §Standard Request Headers): the name re-encoded, custom `Mcp-Param-*` as the client sent them. */
export function protocolHeadersOf(request: StatelessRequest): Record<string, string> {
  const headers: Record<string, string> = { 'mcp-method': request.method, ...request.paramHeaders };
  if (request.name !== undefined) headers['mcp-name'] = encodeHeaderValue(request.name);
  return headers;
}

/** The backend refused the user's linked token: it is forgotten, and the client led to a new link. */
async function tokenRefused(post: StatelessPost, stateless: StatelessRequest, id: JsonRpcId | undefined): Promise<FastifyReply> {
  post.request.log.info({ provider: post.backend.config.upstreamAuth!.provider }, 'backend refused the third-party token; asking the user to link the account again');
  await post.ctx.upstream.forget(principalOf(post.request), post.backend.config);
  return unlinked(post, stateless, id);
}

function unlinked(post: StatelessPost, stateless: StatelessRequest, id: JsonRpcId | undefined): Promise<FastifyReply> | FastifyReply {
  if (id === undefined) return post.reply.code(202).send();
  const params = post.message.params as Record<string, unknown> | undefined;
  return answerUnlinkedStateless({ ...post, id, method: stateless.method, params, clientCapabilities: stateless.clientCapabilities });
}

/**
 * The body to send on: the client's own, or — for a retry that answers the gateway's own
 * input request — the request without the gateway's `requestState` and input response, which
 * the backend never issued; or the parked bridged call a retry continues (bridge-resume.ts).
 * 'answered' when the retry was refused or the user declined.
 */
function retryToForward(post: StatelessPost, stateless: StatelessRequest, id: JsonRpcId | undefined): { body: string } | { resume: ParkedCallRef & { id: JsonRpcId } } | 'answered' {
  const { ctx, request, reply, message } = post;
  const body = request.body as string;
  const params = message.params as Record<string, unknown> | undefined;
  if (!RequestStates.isOurs(params?.requestState) || id === undefined) return { body };
  // Bound to this endpoint, whose access rules (policy/backend-guard.ts) have just admitted this retry's token.
  const opened = ctx.requestStates.open(params.requestState, { userKey: principalOf(request).userKey, endpoint: post.backend.name }, stateless.method, params);
  if (!opened.ok) {
    sendJsonRpcError(reply, 200, ErrorCode.InvalidParams, `requestState was not accepted (${opened.reason}); send the request again without it`, id);
    return 'answered';
  }
  const parked = parkedCallOf(opened.claims.purpose);
  if (parked) return { resume: { ...parked, id } };
  const { requestState: _ours, inputResponses, ...rest } = params;
  void _ours;
  const responses = { ...(inputResponses as Record<string, unknown> | undefined) };
  const linkAnswer = responses[LINK_INPUT_KEY] as { action?: string } | undefined;
  const approvalAnswer = responses[APPROVAL_INPUT_KEY] as { action?: string } | undefined;
  delete responses[LINK_INPUT_KEY];
  delete responses[APPROVAL_INPUT_KEY];
  if (linkAnswer && linkAnswer.action !== 'accept') {
    declinedLink(reply, id, stateless.method, post.backend.config.upstreamAuth?.provider ?? post.backend.name);
    return 'answered';
  }
  // A held call's retry (issue 46): sent on, where the approval bound to it in the store decides; the state only proved it is this request's.
  if (approvalOfPurpose(opened.claims.purpose) !== undefined && approvalAnswer && approvalAnswer.action !== 'accept') {
    request.mcpOutcome = 'answered_by_gateway';
    reply.code(200).type('application/json').send(approvalDeclined(id));
    return 'answered';
  }
  const forwarded = Object.keys(responses).length ? { ...rest, inputResponses: responses } : rest;
  return { body: JSON.stringify({ ...message, params: forwarded }) };
}

/** A retry that answers what a 2025 backend asked: continued where the call is held. */
function resume(post: StatelessPost, stateless: StatelessRequest, ref: ParkedCallRef & { id: JsonRpcId }): Promise<FastifyReply> {
  const { ctx, request, reply } = post;
  const continuation: Continuation = {
    userKey: principalOf(request).userKey,
    endpoint: post.backend.name,
    parkId: ref.parkId,
    method: stateless.method,
    params: (post.message.params as Record<string, unknown> | undefined) ?? {},
    attempt: { id: ref.id, logLevel: stateless.logLevel },
  };
  if (ref.replicaId === ctx.coordinator.replicaId) return resumeHere(ctx, reply, continuation);
  return ctx.bridgeReplicas.resumeElsewhere(ctx, reply, ref.replicaId, continuation);
}

/**
 * A 400 by which a backend says it does not serve the 2026-07-28 request as such: -32022 (the
 * revision is not among its versions), or the session-era refusal of a request without a session
 * (id null, -32000 as SDK servers send it, or -32600) — never an error about the request itself.
 */
function refusedAsLegacy(text: string): boolean {
  const answer = parseObject(text);
  const code = (answer?.error as { code?: unknown } | undefined)?.code;
  if (code === ErrorCode.UnsupportedProtocolVersion) return true;
  return answer?.id === null && (code === -32000 || code === ErrorCode.InvalidRequest);
}
