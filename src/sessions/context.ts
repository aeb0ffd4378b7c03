/**
 * What the session layer and everything built on it share: configuration, state, backend
 * clients, live streams and the user-account services of the backends. Built once in app.ts,
 * before the linking, the aggregated endpoint and the routes that extend it (mcp/context.ts),
 * so that those lower layers never see the MCP routes' context.
 */
import type { McpBackend } from '../backends/backend.js';
import type { Config } from '../config/schema.js';
import type { UpstreamAuth } from '../connect/upstream-auth.js';
import type { TokenExchange } from '../exchange/token-exchange.js';
import type { Metrics } from '../ops/metrics.js';
import type { Coordinator } from '../state/coordinator.js';
import type { StateStore } from '../state/store.js';
import type { StreamRegistry } from '../streams/stream-registry.js';
import type { SessionService } from './session-service.js';

export interface SessionContext {
  readonly config: Config;
  readonly store: StateStore;
  readonly coordinator: Coordinator;
  readonly sessions: SessionService;
  /** The configured backends by name (the aggregated `/mcp` is not one of them). */
  readonly backends: ReadonlyMap<string, McpBackend>;
  readonly streams: StreamRegistry;
  readonly metrics: Metrics;
  /** Third-party authorization of backends with `upstreamAuth` (SPEC §4); idle when none has it. */
  readonly upstream: UpstreamAuth;
  /** Tokens exchanged for the user, for backends with `tokenExchange` (absent when none has it). */
  readonly exchange?: TokenExchange;
}
