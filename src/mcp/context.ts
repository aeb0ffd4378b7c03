/**
 * What the MCP route handlers share: the session layer's context (sessions/context.ts), the
 * account linking of backends that need the user's own account (src/linking/), the stateless
 * era's backend revisions and request states (src/stateless/), and the aggregated endpoint
 * `/mcp` as one more backend (src/aggregate/). Built once in app.ts.
 */
import type { McpBackend } from '../backends/backend.js';
import type { StatelessContext } from '../stateless/context.js';

export interface McpContext extends StatelessContext {
  readonly aggregate: McpBackend;
  /** The virtual servers (`servers`, issue 31 §1), by name: `/mcp/{name}` beside the backends. A config reload changes its entries in place (src/reload/server-set.ts). */
  readonly virtualServers: Map<string, McpBackend>;
}
