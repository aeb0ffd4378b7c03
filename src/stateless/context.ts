/**
 * What the stateless era's handlers share (MCP 2026-07-28): the linking context (sessions,
 * backends, upstream authorization, linking), plus which revision each backend speaks and the
 * sealer of the gateway's own `requestState`. The MCP routes' context extends it
 * (mcp/context.ts), so the route hands its own context down.
 */
import type { BackendEras } from '../backends/era.js';
import type { LinkingContext } from '../linking/linking.js';
import type { RequestStates } from './request-state.js';

export interface StatelessContext extends LinkingContext {
  /** Which revision each backend speaks (probed once with `server/discover`, or pinned by `backends[].protocol`). */
  readonly eras: BackendEras;
  /** Seals and opens the gateway's own `requestState` (request-state.ts). */
  readonly requestStates: RequestStates;
}
