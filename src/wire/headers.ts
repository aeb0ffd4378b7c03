/**
 * Reading HTTP header values as Node and undici hand them over: a header sent more than once
 * arrives as a list (RFC 9110 §5.3 allows combining repeated fields), so every reader of a
 * singleton header (Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Content-Type,
 * Retry-After, traceparent) takes its first value the same way.
 */

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
