/**
 * What the MCP route handlers share: the session layer's context (sessions/context.ts), the
 * account linking of backends that need the user's own account (src/linking/), and the
 * aggregated endpoint `/mcp` as one more backend (src/aggregate/). Built once in app.ts.
 */
import type { McpBackend } from '../backends/backend.js';
import type { Linking } from '../linking/linking.js';
import type { SessionContext } from '../sessions/context.js';

export interface McpContext extends SessionContext {
  readonly linking: Linking;
  readonly aggregate: McpBackend;
}
