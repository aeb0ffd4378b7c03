/**
 * Listening and graceful shutdown (SPEC §5): on SIGTERM/SIGINT readiness turns 503, open
 * SSE streams get `retry` and end, in-flight requests finish within the deadline, resources
 * are released, and the process exits 0 (1 when the deadline passed).
 */
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppOptions } from './app.js';
import type { Config } from './config/schema.js';
import { startMetricsListener, type MetricsListener } from './ops/metrics-listener.js';

export interface RunningServer {
  app: FastifyInstance;
  /** Base URL the server listens on. */
  url: string;
  /** Base URL of the metrics listener, when `metrics.listen` is set. */
  metricsUrl?: string;
  close(): Promise<void>;
}

export async function startServer(config: Config, options: AppOptions = {}): Promise<RunningServer> {
  const app = await buildApp(config, options);
  const address = await app.listen({ host: config.listen.host, port: config.listen.port });
  let metrics: MetricsListener | undefined;
  if (config.metrics.listen) {
    const { host, port } = config.metrics.listen;
    const token = config.admin.token;
    // Approving a change of a backend's pins (issue 31 §2): only backends that are pinned have any,
    // and a lockfile's are the file's, as `switchboard pins approve` says (issue 41 §7).
    const approve = async (backend: string, tool?: string) => {
      const pinned = config.backends.find((b) => b.name === backend && b.pinning.mode !== 'off');
      if (pinned?.pinning.lockfile) return { refused: `the pins of backend "${backend}" are its lockfile (${pinned.pinning.lockfile}): export the new definitions and replace the file instead` };
      return pinned ? app.pinning.approve(backend, tool) : undefined;
    };
    const admin = token ? { token, approve } : undefined;
    metrics = await startMetricsListener({ host, port, metrics: app.metrics, bearerToken: config.metrics.bearerToken, log: app.log, admin }).catch(async (err: unknown) => {
      await app.close();
      throw err;
    });
  }
  // The metrics listener closes last, so the drain itself can still be scraped.
  const close = async () => {
    try {
      await app.close();
    } finally {
      await metrics?.close();
    }
  };
  return { app, url: address, metricsUrl: metrics?.url, close };
}

/**
 * Closes the server on the first SIGTERM/SIGINT, with a hard deadline a little after the
 * configured drain timeout.
 */
export function closeOnSignals(server: RunningServer, onClosed: () => Promise<void> = async () => {}): void {
  const deadlineMs = server.app.mcp.config.shutdown.drainTimeout + 5_000;
  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    server.app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      server.app.log.error('shutdown deadline passed; exiting');
      process.exit(1);
    }, deadlineMs);
    timer.unref();
    server
      .close()
      .then(onClosed)
      .then(() => process.exit(0))
      .catch((err: Error) => {
        server.app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}
