/**
 * `GET /metrics`: the Prometheus text exposition of this replica's registry (SPEC §6).
 *
 * It names every backend and provider, so SPEC §8 lets operators keep it from whoever
 * reaches the port (issue 13):
 *  - `metrics.bearerToken`: every scrape needs `Authorization: Bearer <token>` (RFC 6750
 *    §2.1), compared in constant time; anything else gets 401 with a `WWW-Authenticate`
 *    challenge. Prometheus sends it with `authorization: { credentials_file }`.
 *  - `metrics.listen`: served on a listener of its own (metrics-listener.ts), e.g. a port
 *    that only the cluster's Prometheus can reach, and no longer on the main port.
 * Neither is set by default, so existing scrapers keep working; docs/operations.md ("Locking /metrics down") says how to
 * lock it down.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Metrics } from './metrics.js';

/** The challenge sent with a 401 (RFC 6750 §3). */
export const METRICS_CHALLENGE = 'Bearer realm="metrics"';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Whether an `Authorization` header value admits a scrape. Without a configured token every
 * scrape is admitted. Both sides are hashed first, so the comparison takes the same time
 * whatever the length or content of what was sent (`timingSafeEqual` needs equal lengths).
 */
export function metricsAccess(bearerToken: string | undefined): (authorization: string | undefined) => boolean {
  if (bearerToken === undefined) return () => true;
  const expected = digest(bearerToken);
  return (authorization) => {
    const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
    return timingSafeEqual(digest(match?.[1] ?? ''), expected) && match !== null;
  };
}

export function registerMetricsRoute(app: FastifyInstance, metrics: Metrics, bearerToken?: string): void {
  const admits = metricsAccess(bearerToken);
  app.get('/metrics', async (request, reply) => {
    if (!admits(request.headers.authorization)) {
      return reply.code(401).header('www-authenticate', METRICS_CHALLENGE).send({ error: 'unauthorized' });
    }
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
}
