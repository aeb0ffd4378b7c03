/**
 * `/metrics` on a listener of its own (`metrics.listen: { host, port }`, SPEC §8, issue 13),
 * so that the main port, which the Ingress exposes, no longer serves it: in Kubernetes the
 * metrics port stays inside the cluster (the chart's Service names it `metrics` and the
 * ServiceMonitor scrapes it). `metrics.bearerToken` applies here too.
 *
 * A bare node:http server rather than a second Fastify instance: it answers one route,
 * carries no MCP hooks, and must keep answering while the main app drains on shutdown
 * (it is closed after the app, see server.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Metrics } from './metrics.js';
import { METRICS_CHALLENGE, metricsAccess } from './metrics-route.js';
import { ADMIN_APPROVE_PATH, handleAdmin, type AdminRoutes } from './admin-route.js';

export interface MetricsListenerOptions {
  host: string;
  port: number;
  metrics: Metrics;
  bearerToken?: string;
  log: FastifyBaseLogger;
  /** The admin routes (`admin.token`, admin-route.ts); absent: none. */
  admin?: AdminRoutes;
}

export interface MetricsListener {
  /** e.g. `http://127.0.0.1:9464` */
  url: string;
  close(): Promise<void>;
}

export async function startMetricsListener(options: MetricsListenerOptions): Promise<MetricsListener> {
  const admits = metricsAccess(options.bearerToken);
  const send = (res: http.ServerResponse, status: number, type: string, body: string, headers: http.OutgoingHttpHeaders = {}) => {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...headers }).end(body);
  };
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (options.admin && path === ADMIN_APPROVE_PATH) return handleAdmin(options.admin, req, res, send);
    if (path !== '/metrics') return send(res, 404, 'application/json', '{"error":"not_found"}');
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'application/json', '{"error":"method_not_allowed"}', { allow: 'GET, HEAD' });
    if (!admits(req.headers.authorization)) return send(res, 401, 'application/json', '{"error":"unauthorized"}', { 'www-authenticate': METRICS_CHALLENGE });
    options.metrics.registry.metrics().then(
      (text) => send(res, 200, options.metrics.registry.contentType, text),
      (err: Error) => {
        options.log.error({ err }, 'metrics collection failed');
        send(res, 500, 'application/json', '{"error":"internal"}');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
  options.log.info({ url }, 'metrics listening on their own port');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
