/**
 * Wiring: config → store → auth → backends → routes. Everything that owns a resource
 * releases it when the app closes; open SSE streams are told to `retry` and ended first so
 * that closing does not wait on them (SPEC §5, graceful shutdown).
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type onResponseHookHandler, type RouteOptions } from 'fastify';
import type { JWTVerifyGetKey } from 'jose';
import { createAuthenticate } from './auth/authenticate.js';
import { registerMetadataRoutes } from './auth/metadata-routes.js';
import { allAudiences } from './auth/resources.js';
import { registerBrowserFlows } from './connect/browser-flows.js';
import { Linking } from './linking/linking.js';
import { createTokenVerifier, type TokenVerifier } from './auth/token-verifier.js';
import { StreamableHttpBackend } from './backends/streamable-http.js';
import { AggregatedBackend } from './aggregate/aggregated-backend.js';
import { startLocalBridges } from './backends/bridge/local-bridges.js';
import type { Config } from './config/schema.js';
import type { McpContext } from './mcp/context.js';
import { ErrorCode, errorResponse } from './wire/jsonrpc.js';
import { createOriginGuard } from './http/origin-guard.js';
import { registerRateLimit } from './http/rate-limit.js';
import { registerMcpRoutes } from './mcp/routes.js';
import { SessionService } from './sessions/session-service.js';
import { endEvictedSessions } from './mcp/session-eviction.js';
import { StreamRegistry } from './streams/stream-registry.js';
import { registerHealthRoutes, type Readiness } from './ops/health.js';
import { loggerOptions } from './ops/logger.js';
import { Metrics } from './ops/metrics.js';
import { registerMetricsRoute } from './ops/metrics-route.js';
import { bodyTimeoutOptions } from './http/body-timeout.js';
import { registerOpenApiRoute } from './ops/openapi-route.js';
import { createState } from './state/create-state.js';
import type { StateStore } from './state/store.js';
import { handleReplicaMessage } from './sessions/session-notifier.js';
import { appendHook, prependHook } from './http/route-hooks.js';
import { registerWebSocketTransport } from './transport/websocket-routes.js';
import { createTokenExchange } from './exchange/token-exchange.js';
import { exchangeForBackends } from './exchange/exchanging-backend.js';
import { prepareBroker } from './broker/broker.js';

export interface AppOptions {
  /** A verification key set that replaces JWKS discovery (embedded development issuer). */
  keySet?: JWTVerifyGetKey;
  /** A store to use instead of the one the config names (tests). */
  store?: StateStore;
  /** pino destination override (tests capture log lines). */
  logStream?: NodeJS.WritableStream;
}

declare module 'fastify' {
  interface FastifyInstance {
    readiness: Readiness;
    mcp: McpContext;
    metrics: Metrics;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
/**
 * Request ids only need to be unique for log correlation: a random per-process prefix and a
 * counter, instead of a random UUID per request (crypto on the hot path).
 */
const REPLICA_PREFIX = randomUUID().slice(0, 8);
let requestCounter = 0;
const BROWSER_ROUTE = /^\/(connect|oauth\/callback|login|logout|connections)(\/|$)/;

export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    // With logging off, no logger at all: Fastify would otherwise still make a child logger
    // for every request (measurable on the hot path, see bench/README.md).
    logger: config.log.level === 'silent' ? false : options.logStream ? { ...loggerOptions(config.log.level), stream: options.logStream } : loggerOptions(config.log.level),
    bodyLimit: config.limits.maxBodyBytes,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : `${REPLICA_PREFIX}-${(requestCounter++).toString(36)}`;
    },
    // The body read timeout (`limits.bodyTimeout`, issue 13): Node's requestTimeout bounds the
    // time until the whole request has *arrived* (then 408 and the socket closed); it never
    // applies to the response, so long SSE answers are not cut (see body-timeout.ts).
    ...bodyTimeoutOptions(config.limits.bodyTimeout),
    return503OnClosing: true,
  });

  // Broker mode (SPEC §8): the gateway is its clients' authorization server (src/broker/).
  const broker = await prepareBroker(config, app.log);
  if (broker) config = broker.config;
  // Store, coordinator and rate-limit counter, on one Redis connection (src/state/create-state.ts).
  const state = await createState(config, app.log, { store: options.store });
  const { store, coordinator } = state;
  const verifier: TokenVerifier = createTokenVerifier(
    broker?.verifierOptions ?? {
      issuer: config.auth.issuer,
      audience: allAudiences(config),
      algorithms: config.auth.algorithms,
      clockToleranceMs: config.auth.clockTolerance,
      jwksUri: config.auth.jwksUri,
      keySet: options.keySet,
    },
  );
  // stdio and legacy SSE backends are reached over Streamable HTTP through a local bridge.
  const bridges = await startLocalBridges(config, app.log);
  const backends = new Map(config.backends.map((b) => [b.name, new StreamableHttpBackend(bridges.configFor(b))] as const));
  const streams = new StreamRegistry();
  const metrics = new Metrics({ openStreams: () => streams.size, activeSessions: () => store.countSessions() });
  const sessions = new SessionService(
    store,
    config.sessions.idleTtl,
    (operation) => metrics.stateErrors.inc({ operation }),
    (change, userKey, sessionId) => coordinator.broadcast({ type: change, userKey, sessionId }),
    { maxPerUser: config.sessions.maxPerUser, onEvicted: (principal, evicted) => endEvictedSessions(ctx, principal, evicted, app.log) },
  );
  const ctx: McpContext = { config, store, coordinator, sessions, backends, streams, metrics, exchange: createTokenExchange(config, store, metrics) };
  // Backends with `tokenExchange` get a token exchanged for the user on every call (src/exchange/).
  if (ctx.exchange) exchangeForBackends(backends, ctx.exchange);
  coordinator.onMessage((message) => handleReplicaMessage(ctx, message));
  const readiness: Readiness = { draining: false };
  app.decorate('readiness', readiness);
  app.decorate('mcp', ctx);
  app.decorate('metrics', metrics);
  // Each route gets its own onResponse hook with its template closed over: reading
  // `request.routeOptions` builds a fresh object per request, and a callback-style hook
  // costs no promise (both showed in the bench). Requests no route matched are counted here.
  app.addHook('onRoute', (route: RouteOptions) => {
    const url = route.url;
    const record: onResponseHookHandler = (request, reply, done) => {
      metrics.httpRequests.inc({ method: request.method, route: url, status: reply.statusCode });
      metrics.httpDuration.observe({ method: request.method, route: url }, reply.elapsedTime / 1000);
      done();
    };
    route.onResponse = appendHook(route.onResponse, record);
  });

  // Bodies are kept as text: messages are forwarded byte for byte, and parsed only to route.
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

  // Before any route: it attaches itself to the /mcp… and /ws/mcp… routes as they are added.
  registerRateLimit(app, config, state.rateCounter, metrics);
  registerHealthRoutes(app, store, readiness);
  // With `metrics.listen`, /metrics has a listener of its own (server.ts) instead.
  if (!config.metrics.listen) registerMetricsRoute(app, metrics, config.metrics.bearerToken);
  registerOpenApiRoute(app);
  registerMetadataRoutes(app, config);
  const originGuard = createOriginGuard(config);
  broker?.register(app, { store, originGuard });
  // The browser pages get the same Host/Origin checks as the MCP endpoint (DNS rebinding,
  // CSRF), attached to their routes as they are declared rather than tested on every request.
  app.addHook('onRoute', (route: RouteOptions) => {
    if (BROWSER_ROUTE.test(route.url)) route.onRequest = prependHook(route.onRequest, originGuard);
  });
  if (config.backends.some((b) => b.upstreamAuth)) ctx.linking = new Linking(ctx, app.log);
  ctx.upstream = registerBrowserFlows(app, ctx, { afterLink: async (link) => ctx.linking?.linked(link) });
  ctx.aggregate = new AggregatedBackend(ctx);
  const authenticate = createAuthenticate(config, verifier, (reason) => metrics.authFailures.inc({ reason }));
  registerMcpRoutes(app, ctx, { originGuard, authenticate });
  // `/ws/mcp[/{backend}]`: the same hooks judge the upgrade; each message then goes through `/mcp…` over loopback.
  await registerWebSocketTransport(app, config, { originGuard, authenticate });

  app.addHook('preClose', async () => {
    readiness.draining = true;
    await streams.drain(config.shutdown.drainTimeout);
  });
  app.addHook('onClose', async () => {
    await Promise.allSettled([...[...backends.values()].map((b) => b.close()), bridges.close()]);
    await state.close();
  });
  return app;
}
