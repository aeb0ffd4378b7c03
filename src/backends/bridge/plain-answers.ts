/**
 * The answers a stdio session gives without the child: a JSON-RPC error or nothing, with the
 * HTTP status a Streamable HTTP server would use (MCP 2025-11-25 "Transports": 202 for a POST
 * of notifications and responses only, 404 for a session that is gone, 400 for a request
 * that cannot be served, 409 for a second standalone stream). The MCP layer reads them as it
 * reads any backend's answer.
 */
import type { BackendResponse } from '../backend.js';
import { ExchangeBody } from '../exchange.js';

/** An answer with no body (202 Accepted, 200 to a DELETE). */
export function emptyAnswer(status: number, headers: Record<string, string> = {}): BackendResponse {
  return jsonAnswer(status, '', headers);
}

/** An `application/json` answer of `text` (a JSON-RPC message, or nothing), with its length. */
export function jsonAnswer(status: number, text: string | Buffer, headers: Record<string, string> = {}): BackendResponse {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const body = new ExchangeBody(noop, noop);
  if (bytes.length > 0) body.push(bytes);
  body.end();
  return { status, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(bytes.length) }, body, contentType: 'application/json' };
}

function noop(): void {}
