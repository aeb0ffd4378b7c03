/**
 * Where gateway failures meet the wire (STYLE: one place maps errors). JSON-RPC errors go in
 * a JSON-RPC body; when the client had a request open, the error answers that request with
 * HTTP 200 so that SDK clients surface it as an McpError rather than a transport failure.
 */
import type { FastifyReply } from 'fastify';
import type { BackendError } from '../backends/errors.js';
import type { McpOutcome } from '../ops/metrics.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** How the gateway answered an MCP POST (metrics); unset means relayed. */
    mcpOutcome?: McpOutcome;
  }
}

export function sendJsonRpcError(reply: FastifyReply, status: number, code: number, message: string, id: JsonRpcId | null = null, data?: unknown): FastifyReply {
  if (status >= 400) reply.request.mcpOutcome ??= 'rejected';
  return reply.code(status).type('application/json').send(errorResponse(id, code, message, data));
}

/**
 * A backend failure: each open request gets a JSON-RPC error (one body, or an array for a
 * batch); with no request open, 502 or 504. Code, data and status come from the error's
 * one table (backends/errors.ts).
 */
export function sendBackendError(reply: FastifyReply, error: BackendError, requestIds: readonly JsonRpcId[], batch: boolean): FastifyReply {
  reply.log.warn({ backend: error.backend, failure: error.failure, status: error.status }, error.message);
  reply.server.metrics.backendErrors.inc({ backend: error.backend, reason: error.failure });
  reply.request.mcpOutcome = 'backend_error';
  if (!requestIds.length) return reply.code(error.httpStatus).type('application/json').send(error.rpcError(null));
  const errors = requestIds.map((id) => error.rpcError(id));
  return reply.code(200).type('application/json').send(batch ? errors : errors[0]);
}

export function sendSessionNotFound(reply: FastifyReply): FastifyReply {
  return sendJsonRpcError(reply, 404, ErrorCode.InvalidRequest, 'Session not found: initialize a new session');
}

export function sendStateUnavailable(reply: FastifyReply): FastifyReply {
  reply.request.mcpOutcome = 'state_unavailable';
  reply.header('retry-after', '2');
  return sendJsonRpcError(reply, 503, ErrorCode.StateUnavailable, 'Session state is temporarily unavailable; retry shortly');
}
