/**
 * What the stateless era's handlers share (MCP 2026-07-28): the linking context (sessions,
 * backends, upstream authorization, linking), plus which revision each backend speaks and the
 * sealer of the gateway's own `requestState`, and the bridged calls parked here. The MCP routes' context extends it
 * (mcp/context.ts), so the route hands its own context down.
 */
import type { BackendEras } from '../backends/era.js';
import type { LinkingContext } from '../linking/linking.js';
import type { BridgeReplicas } from './bridge-replicas.js';
import type { LegacyStreams } from './legacy-streams.js';
import type { ParkedCalls } from './parked-calls.js';
import type { RequestStates } from './request-state.js';

export interface StatelessContext extends LinkingContext {
  /** Which revision each backend speaks (probed once with `server/discover`, or pinned by `backends[].protocol`). */
  readonly eras: BackendEras;
  /** Seals and opens the gateway's own `requestState` (request-state.ts). */
  readonly requestStates: RequestStates;
  /** The bridged calls this replica holds open for a client's retry (parked-calls.ts). */
  readonly parkedCalls: ParkedCalls;
  /** Hands a retry to the replica holding its parked call (bridge-replicas.ts). */
  readonly bridgeReplicas: BridgeReplicas;
  /** The GET streams of the gateway's sessions with 2025 backends, read once per replica (legacy-streams.ts). */
  readonly legacyStreams: LegacyStreams;
}
