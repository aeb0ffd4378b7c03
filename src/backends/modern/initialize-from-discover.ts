/**
 * A 2025-11-25 `initialize` result made from a 2026-07-28 backend's `server/discover` (issue
 * 15, "the gateway answers `initialize` from the backend's `server/discover`"): the server's
 * identity (`_meta` `io.modelcontextprotocol/serverInfo`), its instructions, and its
 * capabilities as they are: list changes and resource subscriptions, which that revision
 * delivers through `subscriptions/listen`, reach the client on its GET stream
 * (session-listens.ts). The revision is the client's own when the gateway serves it,
 * else the latest (MCP 2025-11-25 "Lifecycle" §Version Negotiation).
 */
import { META } from '../../wire/revision-2026.js';
import { isSupportedVersion, LATEST_PROTOCOL_VERSION } from '../../wire/protocol.js';

export function initializeFromDiscover(discover: Record<string, unknown>, requestedVersion: unknown, backendName: string): Record<string, unknown> {
  const protocolVersion = typeof requestedVersion === 'string' && isSupportedVersion(requestedVersion) ? requestedVersion : LATEST_PROTOCOL_VERSION;
  const meta = discover._meta as Record<string, unknown> | undefined;
  const serverInfo = (meta?.[META.serverInfo] as Record<string, unknown> | undefined) ?? { name: backendName, version: '0.0.0' };
  const result: Record<string, unknown> = { protocolVersion, capabilities: (discover.capabilities ?? {}) as Record<string, unknown>, serverInfo };
  if (typeof discover.instructions === 'string') result.instructions = discover.instructions;
  return result;
}
