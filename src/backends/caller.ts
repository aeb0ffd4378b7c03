/**
 * Who is calling, as a backend call carries it: real backends ignore it; the aggregated
 * backend (`/mcp`) routes, authorizes and applies the access policy per user with it, and a
 * backend with `tokenExchange` exchanges the caller's token for its own (src/exchange/).
 */
import type { FastifyRequest } from 'fastify';
import type { BackendCaller, TraceHeaders } from './backend.js';
import { principalOf } from '../auth/authenticate.js';
import { headersOf, headerValue } from '../wire/headers.js';

/** `sealState`: a 2026-07-28 request's sealer of the gateway's own `requestState` (BackendCaller.sealState). */
export function callerOf(request: FastifyRequest, sessionId?: string, clientCapabilities?: Record<string, unknown>, sealState?: (purpose: string) => string): BackendCaller {
  return { principal: principalOf(request), sessionId, clientCapabilities, log: request.log, subjectToken: request.subjectToken, headers: headersOf(request), address: request.ip, url: request.url, trace: request.traceScope, parsed: request.rpcParsed, sealState };
}

/**
 * W3C trace context carried to the backend so one trace spans both hops: the client's headers
 * as they came, or — with `telemetry` on — the gateway's SERVER span of this request, which the
 * client face makes the parent of its CLIENT span (src/telemetry/client-span-backend.ts).
 */
export function traceHeaders(request: FastifyRequest): TraceHeaders {
  if (request.traceScope) return request.traceScope.headers;
  const { traceparent, tracestate } = headersOf(request);
  // Most calls carry neither: one shared empty object, nothing made per call (issue 29).
  if (traceparent === undefined && tracestate === undefined) return NO_TRACE;
  return { traceparent: headerValue(traceparent), tracestate: headerValue(tracestate) };
}

const NO_TRACE: TraceHeaders = Object.freeze({});
