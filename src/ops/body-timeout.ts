/**
 * The body read timeout (`limits.bodyTimeout`, SPEC §8 budgets, issue 13): a request whose
 * body has not fully arrived within it gets 408 and its socket is closed, so clients that
 * send headers and then trickle or stall their body cannot hold connections (and the
 * memory behind them) open indefinitely.
 *
 * Why Node's own `server.requestTimeout` and not a timer of ours: it measures exactly "time
 * until the entire request has been received" (from the request's first byte), is checked
 * by the HTTP parser's connection list without a timer per request, and stops applying once
 * the request is complete, so a response that lasts for hours (an SSE stream, a WebSocket
 * after its upgrade) is never cut by it. Fastify's client-error handler writes the 408 and
 * destroys the socket. The gateway used `requestTimeout: 0` before, believing the timeout
 * would cut SSE responses; it does not.
 *
 * Node checks expired requests every `connectionsCheckingInterval` (30 s by default), so a
 * timeout fires up to one interval late: the interval is a tenth of the timeout, between
 * 100 ms and 5 s (the check walks only connections with a request in progress).
 */
import type { ServerOptions } from 'node:http';

/** Node's default `headersTimeout`; it may not exceed `requestTimeout`. */
const NODE_HEADERS_TIMEOUT_MS = 60_000;

export interface BodyTimeoutOptions {
  requestTimeout: number;
  http: ServerOptions;
}

/** The Fastify server options that enforce a body read timeout of `timeoutMs`. */
export function bodyTimeoutOptions(timeoutMs: number): BodyTimeoutOptions {
  return {
    requestTimeout: timeoutMs,
    http: {
      requestTimeout: timeoutMs,
      headersTimeout: Math.min(NODE_HEADERS_TIMEOUT_MS, timeoutMs),
      connectionsCheckingInterval: Math.min(5_000, Math.max(100, Math.round(timeoutMs / 10))),
    },
  };
}
