/**
 * `server/discover` as the gateway answers it (MCP 2026-07-28 "Discovery"): for a backend
 * that cannot answer it — one of the 2025-11-25 era, reached through the gateway's own
 * session, or one whose account the user has not linked yet — the result is made from what
 * the backend said in `initialize` (its capabilities, identity and instructions). The
 * supported versions are always the gateway's: the client talks to the gateway, which bridges.
 */
import { META, STATELESS_REVISIONS } from '../wire/revision-2026.js';

/** A DiscoverResult made from a 2025-era initialize result (or from nothing: tools only). */
export function discoverFromInitialize(initialize: Record<string, unknown> | undefined): Record<string, unknown> {
  const capabilities = (initialize?.capabilities as Record<string, unknown> | undefined) ?? { tools: {} };
  const result: Record<string, unknown> = {
    resultType: 'complete',
    supportedVersions: [...STATELESS_REVISIONS],
    capabilities,
    ttlMs: 0,
    cacheScope: 'private',
  };
  if (initialize?.serverInfo) result._meta = { [META.serverInfo]: initialize.serverInfo };
  if (typeof initialize?.instructions === 'string') result.instructions = initialize.instructions;
  return result;
}

/** A 2026 backend's own DiscoverResult, with the versions narrowed to those the gateway serves statelessly. */
export function narrowDiscover(result: Record<string, unknown>): Record<string, unknown> {
  const theirs = Array.isArray(result.supportedVersions) ? (result.supportedVersions as unknown[]) : [];
  return { ...result, supportedVersions: STATELESS_REVISIONS.filter((v) => theirs.includes(v)) };
}
