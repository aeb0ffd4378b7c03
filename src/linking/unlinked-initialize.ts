/**
 * `initialize` on `/mcp/{backend}` when the backend refused it for want of the user's token
 * (SPEC §8 "Linking"; MCP 2025-11-25 "Lifecycle"). Connecting must never need the
 * third-party account, or the client would never hold a session that can hear
 * `notifications/elicitation/complete`: the gateway opens the client's session itself,
 * answers from the backend's last known result (provisional.ts), and remembers what it
 * needs to open the backend session once the account is linked (backend-session.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { McpBackend } from '../backends/backend.js';
import type { LinkingContext } from './linking.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER } from '../wire/protocol.js';
import { sendStateUnavailable } from '../http/replies.js';
import { newSessionId } from '../sessions/session-service.js';
import { StateUnavailableError } from '../state/errors.js';
import { announcedLists, provisionalInitializeResult } from './provisional.js';
import { principalOf } from '../auth/authenticate.js';

/** `clientInfo` is repeated to the backend later; a client must not make the store keep much of it. */
const MAX_CLIENT_INFO_BYTES = 2048;

export async function initializeUnlinked(ctx: LinkingContext, request: FastifyRequest, reply: FastifyReply, backend: McpBackend, message: JsonRpcMessage & { id: JsonRpcId }): Promise<FastifyReply> {
  const principal = principalOf(request);
  const params = (message.params ?? {}) as { protocolVersion?: unknown; capabilities?: Record<string, unknown>; clientInfo?: unknown };
  const { linking } = ctx;
  const result = provisionalInitializeResult(backend.config, await linking.catalog.initialize(backend.config), params.protocolVersion);
  const announced = announcedLists(result);
  const sessionId = newSessionId();
  try {
    await ctx.sessions.create(principal, sessionId, {
      backend: backend.name,
      protocolVersion: String(result.protocolVersion),
      clientCapabilities: params.capabilities ?? {},
      createdAt: Date.now(),
      link: { clientInfo: boundedClientInfo(params.clientInfo), announced },
    });
  } catch (err) {
    if (err instanceof StateUnavailableError) return sendStateUnavailable(reply);
    throw err;
  }
  const provider = backend.config.upstreamAuth!.provider;
  await linking.waiters.add(principal.userKey, provider, { sessionId, lists: announced }).catch((err: Error) => request.log.warn({ err: err.message }, 'could not remember a session waiting for a link'));
  request.log.info({ backend: backend.name, provider, protocolVersion: result.protocolVersion }, 'session initialized; the backend waits for the account to be linked');
  ctx.metrics.sessionsStarted.inc({ backend: backend.name });
  request.mcpOutcome = 'answered_by_gateway';
  return reply.code(200).type('application/json').header(HEADER.sessionId, sessionId).send({ jsonrpc: '2.0', id: message.id, result });
}

/** The client's `clientInfo`, as kept in a session record: whole up to 2 KiB, else its name and version only. */
export function boundedClientInfo(clientInfo: unknown): unknown {
  if (clientInfo === undefined) return undefined;
  const text = JSON.stringify(clientInfo);
  if (text.length <= MAX_CLIENT_INFO_BYTES) return clientInfo;
  const { name, version } = (clientInfo ?? {}) as { name?: unknown; version?: unknown };
  return { name: String(name ?? 'client').slice(0, 200), version: String(version ?? '0').slice(0, 100) };
}
