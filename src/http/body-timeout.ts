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
 * after its upgrade) is never cut by it. The gateway used `requestTimeout: 0` before,
 * believing the timeout would cut SSE responses; it does not.
 *
 * Node reports the timeout as a client error on the socket; {@link clientErrorHandler}
 * answers it with 408 and a JSON-RPC error body, like every other refusal of the MCP
 * endpoints (openapi.yaml "Error bodies"), and closes the connection.
 *
 * Node checks expired requests every `connectionsCheckingInterval` (30 s by default), so a
 * timeout fires up to one interval late: the interval is a tenth of the timeout, between
 * 100 ms and 5 s (the check walks only connections with a request in progress).
 */
import type { ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import { ErrorCode, errorResponse } from '../wire/jsonrpc.js';

/** Node's default `headersTimeout`; it may not exceed `requestTimeout`. */
const NODE_HEADERS_TIMEOUT_MS = 60_000;

export interface BodyTimeoutOptions {
  requestTimeout: number;
  http: ServerOptions;
  clientErrorHandler: (error: Error & { code?: string }, socket: Socket) => void;
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
    clientErrorHandler: clientErrorHandler(timeoutMs),
  };
}

/**
 * Answers what Node reports before a request reaches Fastify: the body timeout (408), an
 * oversized header block (431) and malformed HTTP (400), each as raw HTTP with a JSON-RPC
 * error body and `connection: close`; a reset connection gets nothing.
 */
export function clientErrorHandler(timeoutMs: number): BodyTimeoutOptions['clientErrorHandler'] {
  return (error, socket) => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, reason, message] =
      error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', `Request Timeout: the request did not arrive whole within ${timeoutMs} ms (limits.bodyTimeout)`]
        : error.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'Request Header Fields Too Large', 'Request Header Fields Too Large']
          : [400, 'Bad Request', 'Bad Request: malformed HTTP request'];
    const body = JSON.stringify(errorResponse(null, ErrorCode.InvalidRequest, message));
    if (socket.writable) {
      socket.write(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    }
    socket.destroy();
  };
}
