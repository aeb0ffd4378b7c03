/**
 * Responses the aggregated backend makes itself, in the shape of a backend's HTTP answer,
 * so that the MCP layer treats them like any other (SPEC §2: `/mcp` behaves as one backend).
 */
import type { BackendError } from '../backends/errors.js';
import type { BackendResponse } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { errorResponse, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';

export function jsonResponse(value: JsonRpcMessage | JsonRpcMessage[], headers: Record<string, string> = {}): BackendResponse {
  return { status: 200, headers: { 'content-type': 'application/json', ...headers }, body: syntheticBody(JSON.stringify(value)), contentType: 'application/json' };
}

export function sseResponse(events: AsyncIterable<Buffer>): BackendResponse {
  return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: syntheticBody(events), contentType: 'text/event-stream' };
}

export function emptyResponse(status: number): BackendResponse {
  return { status, headers: {}, body: syntheticBody(''), contentType: '' };
}

export function errorReply(id: JsonRpcId, code: number, message: string, data?: unknown): BackendResponse {
  return jsonResponse(errorResponse(id, code, message, data));
}

/** The error a request gets when its backend failed; same codes and data as on `/mcp/{backend}`. */
export function backendFailureReply(id: JsonRpcId, error: BackendError): BackendResponse {
  return jsonResponse(error.rpcError(id));
}
