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

/** True when an Accept header lists the media type (or a matching wildcard). */
export function accepts(accept: string | undefined, mediaType: string): boolean {
  if (!accept) return false;
  const [type] = mediaType.split('/');
  return accept.split(',').some((part) => {
    const range = part.split(';')[0]!.trim().toLowerCase();
    return range === mediaType || range === `${type}/*` || range === '*/*';
  });
}
