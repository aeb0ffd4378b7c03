/**
 * A stateless-era request (MCP 2026-07-28) to a backend of the 2025-11-25 era, through the
 * gateway's own session with it (legacy-sessions.ts; issue 15, "Bridging").
 *
 * - `server/discover` is answered from the backend's `initialize` result (discover.ts).
 * - Anything else is sent in the session, as the client sent it: a 2025 server ignores the
 *   2026 `_meta` keys. A session the backend lost (404) is opened again and the request sent
 *   once more.
 * - The answer is made a 2026 one (answer-relay.ts). On its SSE stream, log notifications
 *   reach the client only when `_meta` asked for a level and at or above it (2026-07-28
 *   "Logging": none for a request that did not ask), and a server→client request (sampling,
 *   elicitation, roots) is answered with an error for now: the stateless revision carries
 *   them as `input_required`, and parking the backend's call across the client's retry is
 *   the next step of the bridge. The backend's tool then fails instead of waiting forever.
 */
import type { FastifyReply } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import { callerOf, traceHeaders } from '../backends/caller.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import type { StatelessRequest } from '../wire/stateless-request.js';
import { LOG_LEVELS } from '../wire/revision-2026.js';
import { relayStatelessAnswer } from './answer-relay.js';
import { discoverFromInitialize } from './discover.js';
import { legacySession, LegacySessionRefused, type LegacySession, type LegacySessionInput } from './legacy-sessions.js';
import { sharesAnswersAcrossUsers } from './result-shaping.js';
import type { StatelessPost } from './stateless-post.js';

export interface LegacyForward extends StatelessPost {
  stateless: StatelessRequest;
  id: JsonRpcId | undefined;
  body: string;
  authorization?: string;
}

/** The backend's answer, or 'refused' when it refused the user's token (the caller asks for a new link). */
export async function forwardToLegacyBackend(f: LegacyForward): Promise<FastifyReply | void | 'refused'> {
  const { ctx, request, reply, backend, stateless, id } = f;
  const input: LegacySessionInput = {
    ctx,
    backend,
    caller: callerOf(request, undefined, stateless.clientCapabilities),
    clientCapabilities: stateless.clientCapabilities,
    clientInfo: stateless.clientInfo,
    authorization: f.authorization,
    trace: traceHeaders(request),
  };
  let session: LegacySession;
  try {
    session = await legacySession(input);
  } catch (err) {
    if (err instanceof LegacySessionRefused) return 'refused';
    throw err;
  }
  if (stateless.method === 'server/discover') {
    request.mcpOutcome = 'answered_by_gateway';
    return reply.code(200).type('application/json').send({ jsonrpc: '2.0', id: id ?? null, result: discoverFromInitialize(session.initialize) });
  }
  let res = await send(f, input, session);
  if (res.status === 404) {
    await res.body.dump();
    session = await legacySession(input, true);
    res = await send(f, input, session);
  }
  if (res.status === 401 && f.authorization !== undefined) {
    await res.body.dump();
    return 'refused';
  }
  return relayStatelessAnswer(reply, res, {
    backend: backend.name,
    method: stateless.method,
    id,
    shared: sharesAnswersAcrossUsers(backend.config),
    keep: (message) => keepForClient(f, input, session, message),
  });
}

function send(f: LegacyForward, input: LegacySessionInput, session: LegacySession): Promise<BackendResponse> {
  return f.backend.post(f.body, { sessionId: session.backendSessionId, protocolVersion: session.protocolVersion, authorization: f.authorization, ...input.trace, caller: input.caller });
}

/** Whether one message of the backend's SSE answer goes to the client (see the file's comment). */
function keepForClient(f: LegacyForward, input: LegacySessionInput, session: LegacySession, message: Record<string, unknown>): boolean {
  const method = message.method;
  if (typeof method !== 'string') return true;
  if (message.id !== undefined) {
    const refusal = errorResponse(message.id as JsonRpcId, ErrorCode.MethodNotFound, `"${method}" cannot reach this client: it uses MCP 2026-07-28 through the gateway, which does not relay server requests to 2025-era backends yet`);
    void send({ ...f, body: JSON.stringify(refusal) }, input, session).then((r) => r.body.dump(), () => {});
    return false;
  }
  if (method !== 'notifications/message') return true;
  const levels: readonly string[] = LOG_LEVELS;
  const asked = levels.indexOf(f.stateless.logLevel ?? '');
  const level = levels.indexOf(String((message.params as Record<string, unknown> | undefined)?.level));
  return asked >= 0 && level >= asked;
}
