/**
 * A 2025-11-25 `initialize` result made from a 2026-07-28 backend's `server/discover` (issue
 * 15, "the gateway answers `initialize` from the backend's `server/discover`"): the server's
 * identity (`_meta` `io.modelcontextprotocol/serverInfo`), its instructions, and its
 * capabilities less what the gateway cannot carry to a session client yet — resource
 * subscriptions and list-change notifications, which the revision delivers through
 * `subscriptions/listen` only. The revision is the client's own when the gateway serves it,
 * else the latest (MCP 2025-11-25 "Lifecycle" §Version Negotiation).
 */
import { META } from '../../wire/revision-2026.js';
import { isSupportedVersion, LATEST_PROTOCOL_VERSION } from '../../wire/protocol.js';

export function initializeFromDiscover(discover: Record<string, unknown>, requestedVersion: unknown, backendName: string): Record<string, unknown> {
  const protocolVersion = typeof requestedVersion === 'string' && isSupportedVersion(requestedVersion) ? requestedVersion : LATEST_PROTOCOL_VERSION;
  const meta = discover._meta as Record<string, unknown> | undefined;
  const serverInfo = (meta?.[META.serverInfo] as Record<string, unknown> | undefined) ?? { name: backendName, version: '0.0.0' };
  const result: Record<string, unknown> = { protocolVersion, capabilities: sessionCapabilities(discover.capabilities), serverInfo };
  if (typeof discover.instructions === 'string') result.instructions = discover.instructions;
  return result;
}

function sessionCapabilities(capabilities: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!capabilities || typeof capabilities !== 'object') return out;
  for (const [name, value] of Object.entries(capabilities as Record<string, unknown>)) {
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
      out[name] = value;
      continue;
    }
    const { listChanged: _listChanged, subscribe: _subscribe, ...rest } = value as Record<string, unknown>;
    void _listChanged, void _subscribe;
    out[name] = rest;
  }
  return out;
}
