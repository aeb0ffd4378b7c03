/**
 * Where the MCP layer meets third-party authorization (SPEC §4, §8 "Linking") on
 * `/mcp/{backend}`: for a backend with `upstreamAuth`, find the user's token, open a backend
 * session that waited for it, or answer for the backend while the account is not linked
 * (linking/provisional.ts): lists from the catalog, calls with the elicitation that leads to
 * the link. Backends without `upstreamAuth` pass straight through.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { BackendConfig } from '../config/schema.js';
import { elicitationRequiredMessages, supportsUrlElicitation } from '../connect/elicitation-replies.js';
import { insufficientScopeError } from '../connect/upstream-auth.js';
import type { BackendResponse } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import { openBackendSession } from '../linking/backend-session.js';
import { linkedAuthorization } from '../linking/linked-authorization.js';
import { answeredProvisionally, answerUnlinked } from '../linking/provisional.js';
import { callerOf, traceHeaders } from '../backends/caller.js';
import type { McpContext } from './context.js';
import { isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER } from '../wire/protocol.js';
import { sendBackendError, sendStateUnavailable } from '../http/replies.js';
import { StateUnavailableError } from '../state/errors.js';
import type { StreamTarget } from './stream-service.js';
import { notifyListsChanged } from '../linking/linking.js';
import { principalOf } from '../auth/authenticate.js';

export type OpenRequest = JsonRpcMessage & { id: JsonRpcId; method: string };

/** How a message for a backend with `upstreamAuth` goes on: to the backend (with this session and token), or answered here. */
export type GateOutcome = { target: StreamTarget; authorization?: string } | undefined;

/**
 * Before forwarding to a backend with `upstreamAuth`: a session waiting for the link gets
 * its backend session opened when a token now exists; without a token, requests that need
 * the account are answered here (the elicitation), while lists and notifications of a real
 * session still go to the backend without a token (servers that let anyone list answer).
 */
export async function passUpstreamGate(t: StreamTarget, messages: JsonRpcMessage[], batch: boolean): Promise<GateOutcome> {
  const { ctx, request, reply, backend } = t;
  const requests = messages.filter(isRequest) as OpenRequest[];
  const auth = await linkedAuthorization(ctx, request, reply, backend.config, requests.map((r) => r.id), batch);
  if (!auth) return undefined;
  let target = t;
  if (t.session.link && auth.authorization) {
    const opened = await openWaitingSession(t, auth.authorization, requests, batch);
    if (opened === 'answered') return undefined;
    if (opened) target = opened;
    else auth.authorization = undefined;
  }
  if (auth.authorization) return { target, authorization: auth.authorization };
  if (!target.session.link && requests.every((r) => answeredProvisionally(r.method))) return { target };
  await answerForUnlinked(target, requests, batch);
  return undefined;
}

/**
 * The backend refused (401) what was sent: a rejected token is forgotten (a moved
 * authorization server followed), and the client answered as unlinked — the link asking for
 * the scope the challenge names where the token lacked it (issue 42 §6, §8).
 */
export async function backendRefused(t: StreamTarget, messages: JsonRpcMessage[], batch: boolean, sentToken: boolean, wwwAuthenticate?: string | string[]): Promise<FastifyReply> {
  if (sentToken) t.request.log.info({ provider: t.backend.config.upstreamAuth!.provider }, 'backend refused the third-party token; asking the user to link the account again');
  const scopes = await t.ctx.upstream.refused(principalOf(t.request), t.backend.config, wwwAuthenticate, sentToken);
  return answerForUnlinked(t, messages.filter(isRequest) as OpenRequest[], batch, scopes);
}

/**
 * The backend answered the user's token with 403 (MCP 2025-11-25 "Authorization", §Step-Up
 * Authorization Flow): for `insufficient_scope`, every request gets the step-up link (-32042
 * or its text form, as for a first link) asking for the wider scope, and the client's retry
 * after the link goes with the new token; a 403 asking for nothing the token lacks gets the
 * error instead. The token is kept either way. Undefined (body unread) for any other 403.
 */
export async function stepUp(t: StreamTarget, res: BackendResponse, messages: JsonRpcMessage[], batch: boolean): Promise<FastifyReply | undefined> {
  const { ctx, request, reply, backend } = t;
  const requests = messages.filter(isRequest) as OpenRequest[];
  const decision = await ctx.upstream.stepUp(principalOf(request), backend.config, res.headers['www-authenticate'], t.sessionId);
  if (!decision) return undefined;
  await res.body.dump().catch(() => {});
  const provider = backend.config.upstreamAuth!.provider;
  if ('hopeless' in decision) {
    request.log.info({ provider, ...decision.hopeless }, 'backend wants scopes the linked token already has; no new link');
    return sendBackendError(reply, insufficientScopeError(backend.config, decision.hopeless), requests.map((r) => r.id), batch);
  }
  request.log.info({ provider, scopes: decision.elicitation.scopes }, 'backend wants more scopes; asking the user for a step-up link');
  if (!requests.length) return reply.code(202).send();
  request.mcpOutcome = 'answered_by_gateway';
  const answers = elicitationRequiredMessages(requests, decision.elicitation, ctx.config.publicUrl, supportsUrlElicitation(t.session.clientCapabilities));
  return reply.code(200).type('application/json').header(HEADER.sessionId, t.sessionId).send(batch ? answers : answers[0]);
}

/** Answers requests for a backend whose account is not linked (notifications and responses: 202); `scopes`: what its link asks for. */
export async function answerForUnlinked(t: StreamTarget, requests: OpenRequest[], batch: boolean, scopes?: string[]): Promise<FastifyReply> {
  const { ctx, request, reply, backend } = t;
  if (!requests.length) return reply.code(202).send();
  const answers = await answerUnlinked({
    backend: backend.config,
    catalog: ctx.linking.catalog,
    requests,
    elicit: () => ctx.upstream.elicit(principalOf(request), backend.config, t.sessionId, scopes),
    publicUrl: ctx.config.publicUrl,
    urlMode: supportsUrlElicitation(t.session.clientCapabilities),
  });
  request.mcpOutcome = 'answered_by_gateway';
  return reply.code(200).type('application/json').header(HEADER.sessionId, t.sessionId).send(batch ? answers : answers[0]);
}

/** Opens the backend session that waited for a link; the new target, undefined when the token was refused, or 'answered'. */
async function openWaitingSession(t: StreamTarget, authorization: string, requests: OpenRequest[], batch: boolean): Promise<StreamTarget | undefined | 'answered'> {
  const announced = t.session.link!.announced;
  try {
    const record = await openBackendSession({
      ctx: t.ctx,
      backend: t.backend,
      caller: { ...callerOf(t.request, t.sessionId, t.session.clientCapabilities), sessionId: t.sessionId },
      record: t.session,
      authorization,
      trace: traceHeaders(t.request),
    });
    if (!record) return undefined;
    // A client that is not re-listing right now learns that the lists are real at last.
    if (!requests.some((r) => r.method.endsWith('/list'))) await notifyListsChanged(t.ctx, principalOf(t.request).userKey, t.sessionId, announced);
    return { ...t, session: record };
  } catch (err) {
    if (err instanceof BackendError) sendBackendError(t.reply, err, requests.map((r) => r.id), batch);
    else if (err instanceof StateUnavailableError) sendStateUnavailable(t.reply);
    else throw err;
    return 'answered';
  }
}
