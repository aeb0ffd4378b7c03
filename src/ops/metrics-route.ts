/**
 * `GET /metrics`: the Prometheus text exposition of this replica's registry (SPEC §6).
 * It sits on the main port like the health probes; restrict it at the Ingress if the
 * gateway is exposed publicly (see README, Deploy).
 */
import type { FastifyInstance } from 'fastify';
import type { Metrics } from './metrics.js';

export function registerMetricsRoute(app: FastifyInstance, metrics: Metrics): void {
  app.get('/metrics', async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
