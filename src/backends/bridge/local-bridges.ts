/**
 * The client of every backend that does not speak Streamable HTTP itself (SPEC §1, backend
 * side): a stdio backend gets a {@link StdioBackend}, which runs its children and answers the
 * gateway in-process; a legacy HTTP+SSE backend gets a local bridge (bridge-server.ts) that the
 * ordinary Streamable HTTP client reaches on loopback. app.ts builds its backend clients from
 * `clientFor`, and closes them all on shutdown (SPEC §5: nothing is left running — children
 * are stopped, SSE connections closed).
 *
 * Both kinds are imported only when a backend needs them: they bring the MCP SDK (its zod
 * schemas, its HTTP server and client transports), about 0.35 s of CPU at every start of a
 * gateway that has neither — most of them, and every test file that starts one (issue 43).
 */
import type { BackendConfig, Config } from '../../config/schema.js';
import type { McpBackend } from '../backend.js';
import { StreamableHttpBackend } from '../streamable-http.js';
import type { BridgeServer } from './bridge-server.js';
import type { BridgeLogger } from './logger.js';
import type { StdioBackend } from './stdio-backend.js';

export interface LocalBridges {
  /** The client of `backend`: its stdio client, the Streamable HTTP client of its SSE bridge, or of the backend itself. */
  clientFor(backend: BackendConfig): McpBackend;
  close(): Promise<void>;
}

export async function startLocalBridges(config: Config, log: BridgeLogger): Promise<LocalBridges> {
  const bridges = new Map<string, BridgeServer>();
  const stdio = new Map<string, StdioBackend>();
  // A child never outlives the gateway session it serves either.
  const idleMs = Math.min(config.bridge.idleTimeout, config.sessions.idleTtl);
  const { maxSessions, maxSessionsPerUser } = config.bridge;
  const closeAll = () => Promise.allSettled([...bridges.values(), ...stdio.values()].map((b) => b.close()));
  try {
    for (const backend of config.backends) {
      if (backend.transport === 'stdio') {
        const { StdioBackend } = await import('./stdio-backend.js');
        stdio.set(backend.name, new StdioBackend({ backend, idleMs, maxSessions, maxSessionsPerUser, log }));
        log.info({ backend: backend.name, transport: backend.transport }, 'backend reached over stdio, a child per session (single replica)');
        continue;
      }
      if (backend.transport !== 'sse') continue;
      const { BridgeServer } = await import('./bridge-server.js');
      const bridge = new BridgeServer({ backend, idleMs, maxSessions, maxSessionsPerUser, maxBodyBytes: config.limits.maxBodyBytes, log });
      bridges.set(backend.name, bridge);
      await bridge.start();
      log.info({ backend: backend.name, transport: backend.transport }, 'backend reached through a local bridge (single replica)');
    }
  } catch (err) {
    await closeAll();
    throw err;
  }
  return {
    clientFor: (backend) => stdio.get(backend.name) ?? new StreamableHttpBackend(bridges.get(backend.name)?.gatewayConfig() ?? backend),
    close: async () => {
      await closeAll();
    },
  };
}
