/**
 * The backend clients by name: built the one way at start (app.ts) and for each backend a
 * reload adds or changes (docs/operations-reload.md), so a backend added live is the same
 * stack of faces as one configured at start — the 2026-era adapter, the token exchange, the
 * tool policy, then `policy.rules` and the audit, outermost last.
 *
 * A reload changes the one `Map` every component holds (`ctx.backends`) in place: the routes,
 * the aggregated `/mcp`, the access guard and the RFC 9728 metadata find an added backend on
 * their next request, and a removed one is gone from all of them at once.
 */
import { isDeepStrictEqual } from 'node:util';
import type { McpBackend } from '../backends/backend.js';
import type { LocalBridges } from '../backends/bridge/local-bridges.js';
import { ModernEraBackend, type ModernEraParts } from '../backends/modern/modern-era-backend.js';
import type { BackendConfig, Config } from '../config/schema.js';
import { withTokenExchange } from '../exchange/exchanging-backend.js';
import type { TokenExchange } from '../exchange/token-exchange.js';
import type { Metrics } from '../ops/metrics.js';
import { withToolPolicy } from '../policy/tool-policy-backend.js';
import { withClientSpans } from '../telemetry/client-span-backend.js';
import type { Telemetry } from '../telemetry/telemetry.js';

export interface BackendParts {
  bridges: LocalBridges;
  modern: ModernEraParts;
  exchange: TokenExchange;
  metrics: Metrics;
  /** `policy.rules` and the audit (issue 30), outermost; absent when both are off (src/policy/rule-policy-backend.ts). */
  policyFace?: (backend: McpBackend) => McpBackend;
  /** Tool-definition pinning (issue 31 §2; src/pinning/): the backend as it is when `pinning.mode` is off. */
  pinningFace?: (backend: McpBackend) => McpBackend;
  /** With `telemetry`: a CLIENT span per message, innermost, around the client itself (src/telemetry/). */
  telemetry?: Telemetry;
}

/**
 * One backend's client. A streamable-http backend may be of the 2026-07-28 era: its
 * 2025-11-25 clients get sessions kept by the gateway (backends/modern/); stdio backends (a
 * child per session) and legacy SSE ones (the local bridge) speak the session era only.
 */
export function buildBackend(b: BackendConfig, parts: BackendParts): McpBackend {
  const client = withClientSpans(parts.bridges.clientFor(b), parts.telemetry);
  const era: McpBackend = b.transport === 'streamable-http' ? new ModernEraBackend(client, parts.modern) : client;
  // Backends with `tokenExchange` get a token exchanged for the user on every call (src/exchange/);
  // backends with a tool policy hide the same tools on every path that reaches them (src/policy/).
  // Pinning sees the lists as the backend sends them, before a tool policy hides any (src/pinning/).
  const exchanged = withTokenExchange(era, parts.exchange);
  const policed = withToolPolicy(parts.pinningFace ? parts.pinningFace(exchanged) : exchanged, parts.metrics);
  return parts.policyFace ? parts.policyFace(policed) : policed;
}

export function buildBackends(config: Config, parts: BackendParts): Map<string, McpBackend> {
  return new Map(config.backends.map((b) => [b.name, buildBackend(b, parts)] as const));
}

/**
 * Keys whose change points the backend's sessions at another server (or another kind of
 * server): their backend sessions mean nothing there, so they end.
 */
const ENDPOINT_KEYS = ['url', 'transport', 'command', 'args', 'env', 'protocol'] as const;

export interface BackendChanges {
  added: string[];
  removed: string[];
  /** Changed in a way the existing backend sessions survive (headers, timeout, access, tools, tokenExchange). */
  changed: string[];
  /** Changed to another server: their sessions end. */
  moved: string[];
}

export function backendChanges(current: Config, next: Config): BackendChanges {
  const before = new Map(current.backends.map((b) => [b.name, b]));
  const out: BackendChanges = { added: [], removed: [], changed: [], moved: [] };
  for (const b of next.backends) {
    const was = before.get(b.name);
    if (!was) out.added.push(b.name);
    else if (ENDPOINT_KEYS.some((k) => !isDeepStrictEqual(was[k], b[k]))) out.moved.push(b.name);
    else if (!isDeepStrictEqual(was, b)) out.changed.push(b.name);
  }
  const after = new Set(next.backends.map((b) => b.name));
  out.removed = current.backends.filter((b) => !after.has(b.name)).map((b) => b.name);
  return out;
}

export function hasBackendChanges(c: BackendChanges): boolean {
  return c.added.length + c.removed.length + c.changed.length + c.moved.length > 0;
}
