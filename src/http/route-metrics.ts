/**
 * `switchboard_http_requests_total` and `switchboard_http_request_duration_seconds` per
 * route template. Each route gets its own onResponse hook with its template closed over:
 * reading `request.routeOptions` builds a fresh object per request, and a callback-style
 * hook costs no promise (both showed in the bench). The same hook hands the template to the
 * access line. Must be registered before the routes.
 */
import type { FastifyInstance, onResponseHookHandler, RouteOptions } from 'fastify';
import type { Metrics } from '../ops/metrics.js';
import { appendHook } from './route-hooks.js';

export function recordRouteMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    const url = route.url;
    const record: onResponseHookHandler = (request, reply, done) => {
      // For the access line, written after the response hooks (ops/access-log.ts).
      request.routeTemplate = url;
      const method = request.method;
      metrics.httpRequests.at(method, url, reply.statusCode).value++;
      metrics.httpDuration.observe(metrics.httpDuration.at(method, url), reply.elapsedTime / 1000);
      done();
    };
    route.onResponse = appendHook(route.onResponse, record);
  });
}
