/**
 * What the MCP handlers share: configuration, state, backend clients and live streams.
 * Built once in app.ts.
 */
import type { McpBackend } from '../backends/backend.js';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import type { UpstreamAuth } from '../connect/upstream-auth.js';
import type { TokenExchange } from '../exchange/token-exchange.js';
import type { Linking } from '../linking/linking.js';
import type { Coordinator } from '../state/coordinator.js';
import type { StateStore } from '../state/store.js';
import type { SessionService } from '../sessions/session-service.js';
import type { StreamRegistry } from '../streams/stream-registry.js';

export interface McpContext {
  config: Config;
  store: StateStore;
  coordinator: Coordinator;
  sessions: SessionService;
  backends: ReadonlyMap<string, McpBackend>;
  streams: StreamRegistry;
  metrics: Metrics;
  /** The aggregated endpoint `/mcp` as one more backend (src/aggregate/). */
  aggregate?: McpBackend;
  /** Third-party authorization for backends with `upstreamAuth` (absent when none has it). */
  upstream?: UpstreamAuth;
  /** Catalog and waiting sessions of backends that need the user's account (present with `upstream`). */
  linking?: Linking;
  /** Tokens exchanged for the user, for backends with `tokenExchange` (absent when none has it). */
  exchange?: TokenExchange;
}
