/**
 * Reading HTTP header values as Node and undici hand them over: a header sent more than once
 * arrives as a list (RFC 9110 §5.3 allows combining repeated fields), so every reader of a
 * singleton header (Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Content-Type,
 * Retry-After, traceparent) takes its first value the same way.
 */

import type { IncomingHttpHeaders } from 'node:http';

/**
 * A Fastify request's headers, read from Node's message: the very object Fastify's
 * `request.headers` getter returns (it makes a copy only once a hook has assigned
 * `request.headers`, which the gateway never does). Why not the getter (issue 44 part 1): V8
 * calls it out of line, and since a request gains fields as it passes (`principal`,
 * `rpcMethod`, `traceScope`), the loads inside it meet many hidden classes and take V8's slow
 * megamorphic lookups, about 200 instructions a read, read up to 9 times a governed call.
 * Here the load is the caller's own, and each caller meets a request at one stage of its life.
 */
export function headersOf(request: { readonly raw: { readonly headers: IncomingHttpHeaders } }): IncomingHttpHeaders {
  return request.raw.headers;
}

/** A header's value as Node's `IncomingHttpHeaders` and undici's response headers give it. */
export type HeaderField = string | readonly string[] | undefined;

/** The first value of a header that may have been repeated; undefined when it is absent. */
export function headerValue(value: HeaderField): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value[0];
}

/**
 * The media type of a Content-Type header, lower-cased and without its parameters
 * (RFC 9110 §8.3.1: `text/event-stream; charset=utf-8` is `text/event-stream`); '' when absent.
 */
export function mediaTypeOf(value: HeaderField): string {
  const given = headerValue(value) ?? '';
  // What backends send nearly always, as written: no parsing (issue 29).
  if (given === 'application/json' || given === 'text/event-stream') return given;
  return given.split(';')[0]!.trim().toLowerCase();
}
