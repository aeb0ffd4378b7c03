/**
 * Protocol revisions and header rules of the Streamable HTTP transport
 * (MCP 2025-11-25 "Transports" §"Protocol Version Header").
 */
export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export const LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0];
/** Assumed when a request carries no MCP-Protocol-Version header (spec: for backwards compatibility). */
export const DEFAULT_PROTOCOL_VERSION = '2025-03-26';

export const HEADER = {
  sessionId: 'mcp-session-id',
  protocolVersion: 'mcp-protocol-version',
  lastEventId: 'last-event-id',
  /** MCP 2026-07-28 Transports §Standard Request Headers: the body's `method`, on every request. */
  method: 'mcp-method',
  /** The same: `params.name` of tools/call and prompts/get, `params.uri` of resources/read. */
  name: 'mcp-name',
  /** The same, §Custom Headers from Tool Parameters: `Mcp-Param-{x-mcp-header}` (names lower-cased, as Node gives them). */
  paramPrefix: 'mcp-param-',
} as const;

export function isSupportedVersion(v: string): boolean {
  return (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(v);
}

/** Batching exists only in 2025-03-26. */
export function allowsBatch(version: string): boolean {
  return version === '2025-03-26';
}

/** SSE priming events (an id with empty data) were introduced in 2025-11-25; older clients may not expect them. */
export function wantsPriming(version: string): boolean {
  return version >= '2025-11-25';
}

/**
 * True when an Accept header lists the media type (or a matching wildcard). Each range is
 * looked at where it lies in the header, without splitting it into strings: asked twice per
 * MCP POST, the splitting showed in the gateway's instruction count (issue 29). Media types
 * compare case-insensitively (RFC 9110 §8.3.1); parameters (`;q=…`) are not weighed.
 */
export function accepts(accept: string | undefined, mediaType: string): boolean {
  if (!accept) return false;
  for (let start = 0; start <= accept.length; ) {
    let end = accept.indexOf(',', start);
    if (end < 0) end = accept.length;
    const semicolon = accept.indexOf(';', start);
    let to = semicolon >= 0 && semicolon < end ? semicolon : end;
    let from = start;
    while (from < to && isOptionalWhitespace(accept.charCodeAt(from))) from++;
    while (to > from && isOptionalWhitespace(accept.charCodeAt(to - 1))) to--;
    if (rangeIs(accept, from, to, mediaType) || (accept.charCodeAt(to - 1) === ASTERISK && wildcardCovers(accept, from, to, mediaType))) return true;
    start = end + 1;
  }
  return false;
}

const ASTERISK = 0x2a;

/** Whether the range `header[from, to)`, ending in an asterisk, is the any-type range or `type/` and an asterisk for the media type. */
function wildcardCovers(header: string, from: number, to: number, mediaType: string): boolean {
  return rangeIs(header, from, to, '*/*') || rangeIs(header, from, to, `${mediaType.slice(0, mediaType.indexOf('/'))}/*`);
}

/** Whether `header[from, to)` is `range` (a lower-case media range), ignoring case. */
function rangeIs(header: string, from: number, to: number, range: string): boolean {
  if (to - from !== range.length) return false;
  return header.startsWith(range, from) || header.slice(from, to).toLowerCase() === range;
}

/** SP or HTAB (RFC 9110 §5.6.3). */
function isOptionalWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09;
}
