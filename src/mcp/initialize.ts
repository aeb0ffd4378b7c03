/**
 * `initialize` through the gateway (MCP 2025-11-25 "Lifecycle"): the backend negotiates
 * the protocol revision with the client's own request; the gateway opens its own session
 * for the client, bound to the user, and remembers the backend's session id, the revision
 * and the client's capabilities (URL-mode elicitation needs them later).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { BackendError } from '../backends/errors.js';
import type { McpBackend } from '../backends/backend.js';
import { callerOf, traceHeaders } from '../backends/caller.js';
import { collectMessages } from '../backends/backend-body.js';
import type { McpContext } from './context.js';
import { ErrorCode, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER, isSupportedVersion } from '../wire/protocol.js';
import { headerValue } from '../wire/headers.js';
import { sendBackendError, sendJsonRpcError, sendStateUnavailable } from '../http/replies.js';
import { newSessionId } from '../sessions/session-service.js';
import { StateUnavailableError } from '../state/errors.js';
import { SseWriter } from '../streams/sse-writer.js';
import { linkedAuthorization } from '../linking/linked-authorization.js';
import { initializeUnlinked } from '../linking/unlinked-initialize.js';
import { principalOf } from '../auth/authenticate.js';

export async function handleInitialize(ctx: McpContext, request: FastifyRequest, reply: FastifyReply, backend: McpBackend, message: JsonRpcMessage & { id: string | number }, body: string): Promise<FastifyReply | void> {
  let collected;
  let backendSessionId: string | undefined;
  const params = (message.params ?? {}) as { capabilities?: Record<string, unknown> };
  // A user with no linked account initializes without a token: servers that admit that
  // give a real session; those that answer 401 get one answered by the gateway (below).
  const upstream = await linkedAuthorization(ctx, request, reply, backend.config, [message.id], false);
  if (!upstream) return reply;
  try {
    const res = await backend.post(body, { authorization: upstream.authorization, ...traceHeaders(request), caller: callerOf(request, undefined, params.capabilities) });
    if (res.status === 401 && Boolean(backend.config.upstreamAuth)) {
      await res.body.dump();
      if (upstream.authorization) await ctx.upstream.forget(principalOf(request), backend.config);
      return initializeUnlinked(ctx, request, reply, backend, message);
    }
    if (res.status !== 200) {
      const text = await res.body.text().catch(() => '');
      if (res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403 && res.status !== 404 && res.contentType === 'application/json') {
        // The backend judged the client's initialize; pass its answer on.
        return reply.code(res.status).type('application/json').send(text);
      }
      throw new BackendError(backend.name, 'bad_status', `backend "${backend.name}" answered initialize with HTTP ${res.status}`, res.status);
    }
    backendSessionId = headerValue(res.headers[HEADER.sessionId]);
    collected = await collectMessages(res).catch((err: Error) => {
      throw new BackendError(backend.name, 'protocol', `backend "${backend.name}" sent an unreadable initialize response (${err.message})`);
    });
  } catch (err) {
    if (err instanceof BackendError) return sendBackendError(reply, err, [message.id], false);
    throw err;
  }

  const response = collected.messages.find((m) => m.id === message.id && ('result' in m || 'error' in m));
  if (!response) {
    return sendBackendError(reply, new BackendError(backend.name, 'protocol', `backend "${backend.name}" did not answer initialize`), [message.id], false);
  }
  const result = response.result as { protocolVersion?: string } | undefined;
  if (result) {
    const version = String(result.protocolVersion);
    if (!isSupportedVersion(version)) {
      return sendJsonRpcError(reply, 200, ErrorCode.InternalError, `backend "${backend.name}" negotiated protocol version ${version}, which the gateway does not support`, message.id);
    }
    if (Boolean(backend.config.upstreamAuth)) await ctx.linking.catalog.rememberInitialize(backend.config, result, upstream.authorization ? 'user' : 'anonymous');
    const sessionId = newSessionId();
    try {
      await ctx.sessions.create(principalOf(request), sessionId, {
        backend: backend.name,
        backendSessionId,
        protocolVersion: version,
        clientCapabilities: params.capabilities ?? {},
        createdAt: Date.now(),
      });
    } catch (err) {
      if (err instanceof StateUnavailableError) return sendStateUnavailable(reply);
      throw err;
    }
    reply.header(HEADER.sessionId, sessionId);
    request.log.info({ backend: backend.name, protocolVersion: version }, 'session initialized');
    ctx.metrics.sessionsStarted.inc({ backend: backend.name });
  }

  return sendCollected(ctx, reply, collected.texts);
}

/**
 * Sends what was collected from a backend answer: a lone response as JSON; anything the
 * backend sent along with it (log notifications, say) keeps its order as SSE events.
 */
export function sendCollected(ctx: McpContext, reply: FastifyReply, texts: readonly string[]): FastifyReply | void {
  if (texts.length === 1) return reply.code(200).type('application/json').send(texts[0]);
  reply.hijack();
  const writer = new SseWriter(reply.raw, { keepAliveMs: ctx.config.streams.keepAlive, headers: sessionHeader(reply) });
  for (const text of texts) writer.message(text);
  writer.end();
}

function sessionHeader(reply: FastifyReply): Record<string, string> {
  const id = reply.getHeader(HEADER.sessionId);
  return id ? { [HEADER.sessionId]: String(id) } : {};
}
