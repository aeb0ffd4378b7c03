/**
 * What the gateway answers when Fastify itself refuses a request (too large, wrong media
 * type, a route's thrown error) or no route matches: a JSON-RPC error body with a null id
 * (JSON-RPC 2.0 §5: the request's id was never read), so MCP clients can show the reason.
 * Bodies are kept as text: messages are forwarded byte for byte and parsed only to route.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import { ErrorCode, errorResponse } from '../wire/jsonrpc.js';

export function registerBodyHandling(app: FastifyInstance, config: Config, metrics: Metrics): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode ?? 500;
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send(errorResponse(null, ErrorCode.InvalidRequest, `Payload Too Large: the limit is ${config.limits.maxBodyBytes} bytes`));
    }
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return reply.code(415).send(errorResponse(null, ErrorCode.InvalidRequest, 'Unsupported Media Type: Content-Type must be application/json'));
    }
    if (status < 500) return reply.code(status).send(errorResponse(null, ErrorCode.InvalidRequest, error.message));
    request.log.error({ err: error }, 'request failed');
    return reply.code(500).send(errorResponse(null, ErrorCode.InternalError, 'Internal error'));
  });
  app.setNotFoundHandler((request, reply) => {
    metrics.httpRequests.inc({ method: request.method, route: 'unmatched', status: 404 });
    return reply.code(404).send({ error: 'not_found' });
  });
}
