/**
 * Who is calling, as a backend call carries it: real backends ignore it; the aggregated
 * backend (`/mcp`) routes, authorizes and applies the access policy per user with it, and a
 * backend with `tokenExchange` exchanges the caller's token for its own (src/exchange/).
 */
import type { FastifyRequest } from 'fastify';
import type { BackendCaller } from './backend.js';
import { principalOf } from '../auth/authenticate.js';
import { headerValue } from '../wire/headers.js';

export function callerOf(request: FastifyRequest, sessionId?: string, clientCapabilities?: Record<string, unknown>): BackendCaller {
  return { principal: principalOf(request), sessionId, clientCapabilities, log: request.log, subjectToken: request.subjectToken, headers: request.headers, address: request.ip, url: request.url };
}

/** W3C trace context the client sent, carried to the backend so one trace spans both hops. */
export function traceHeaders(request: FastifyRequest): { traceparent?: string; tracestate?: string } {
  return {
    traceparent: headerValue(request.headers.traceparent),
    tracestate: headerValue(request.headers.tracestate),
  };
}
