/**
 * Starts one local bridge (bridge-server.ts) per stdio or legacy HTTP+SSE backend, so the
 * gateway can reach every configured backend over Streamable HTTP (SPEC §1, backend side).
 * app.ts builds its backend clients from `configFor`, and closes the bridges on shutdown
 * (SPEC §5: nothing is left running — children are stopped, SSE connections closed).
 */
import type { BackendConfig, Config } from '../../config/schema.js';
import { BridgeServer } from './bridge-server.js';
import type { BridgeLogger } from './logger.js';

export interface LocalBridges {
  /** The config a StreamableHttpBackend should use: the bridge's for stdio/sse, else `backend` itself. */
  configFor(backend: BackendConfig): BackendConfig;
  close(): Promise<void>;
}

export async function startLocalBridges(config: Config, log: BridgeLogger): Promise<LocalBridges> {
  const bridges = new Map<string, BridgeServer>();
  try {
    for (const backend of config.backends) {
      if (backend.transport !== 'stdio' && backend.transport !== 'sse') continue;
      const bridge = new BridgeServer({
        backend,
        // A child never outlives the gateway session it serves either.
        idleMs: Math.min(config.bridge.idleTimeout, config.sessions.idleTtl),
        maxSessions: config.bridge.maxSessions,
        maxSessionsPerUser: config.bridge.maxSessionsPerUser,
        maxBodyBytes: config.limits.maxBodyBytes,
        log,
      });
      bridges.set(backend.name, bridge);
      await bridge.start();
      log.info({ backend: backend.name, transport: backend.transport }, 'backend reached through a local bridge (single replica)');
    }
  } catch (err) {
    await Promise.allSettled([...bridges.values()].map((b) => b.close()));
    throw err;
  }
  return {
    configFor: (backend) => bridges.get(backend.name)?.gatewayConfig() ?? backend,
    close: async () => {
      await Promise.allSettled([...bridges.values()].map((b) => b.close()));
    },
  };
}
