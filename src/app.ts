/**
 * Wiring: config → store → auth → backends → routes. Everything that owns a resource
 * releases it when the app closes; open SSE streams are told to `retry` and ended first so
 * that closing does not wait on them (SPEC §5, graceful shutdown).
 */
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify';
import type { JWTVerifyGetKey } from 'jose';
import { createAuthenticate } from './auth/authenticate.js';
import { registerMetadataRoutes } from './auth/metadata-routes.js';
import { allAudiences } from './auth/resources.js';
import { createTokenVerifier, type TokenVerifier } from './auth/token-verifier.js';
import { StreamableHttpBackend } from './backends/streamable-http.js';
import { startLocalBridges, type LocalBridges } from './backends/bridge/local-bridges.js';
import type { Config } from './config/schema.js';
import type { McpContext } from './mcp/context.js';
import { createOriginGuard } from './http/origin-guard.js';
import { registerRateLimit } from './http/rate-limit.js';
import { registerMcpRoutes } from './mcp/routes.js';
import { buildMcpContext } from './mcp/build-context.js';
import { serverOptions } from './http/server-options.js';
import { registerBodyHandling } from './http/error-handler.js';
import { recordRouteMetrics } from './http/route-metrics.js';
import { SessionService } from './sessions/session-service.js';
import { endEvictedSessions } from './mcp/session-eviction.js';
import { StreamRegistry } from './streams/stream-registry.js';
import { registerHealthRoutes, type Readiness } from './ops/health.js';
import { Metrics } from './ops/metrics.js';
import { registerMetricsRoute } from './ops/metrics-route.js';
import { registerOpenApiRoute } from './ops/openapi-route.js';
import { createState } from './state/create-state.js';
import type { StateStore } from './state/store.js';
import { handleReplicaMessage } from './sessions/session-notifier.js';
import { isBridgeMessage, type ReplicaMessage } from './state/coordinator.js';
import { BackendEras } from './backends/era.js';
import type { McpBackend } from './backends/backend.js';
import { AdaptedSessions } from './backends/modern/adapted-sessions.js';
import { InputAnswers } from './backends/modern/input-answers.js';
import { SessionListens } from './backends/modern/session-listens.js';
import { ModernEraBackend, type ModernEraParts } from './backends/modern/modern-era-backend.js';
import { prependHook } from './http/route-hooks.js';
import { registerWebSocketTransport } from './transport/websocket-routes.js';
import { createTokenExchange } from './exchange/token-exchange.js';
import { exchangeForBackends } from './exchange/exchanging-backend.js';
import { applyToolPolicies } from './policy/tool-policy-backend.js';
import { prepareBroker } from './broker/broker.js';
import { applyRulePolicies } from './policy/rule-policy-backend.js';
import type { Audit, AuditSink } from './ops/audit.js';

export interface AppOptions {
  /** A verification key set that replaces JWKS discovery (embedded development issuer). */
  keySet?: JWTVerifyGetKey;
  /** A store to use instead of the one the config names (tests). */
  store?: StateStore;
  /** pino destination override (tests capture log lines). */
  logStream?: NodeJS.WritableStream;
  /** Where audit records go instead of `audit.sink` (tests). */
  auditSink?: AuditSink;
}

declare module 'fastify' {
  interface FastifyInstance {
    readiness: Readiness;
    mcp: McpContext;
    metrics: Metrics;
    /** The audit trail; undefined when `audit.sink` is none (issue 30 §2). */
    audit: Audit | undefined;
  }
}

const BROWSER_ROUTE = /^\/(connect|oauth\/callback|login|logout|connections)(\/|$)/;

export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(config, options.logStream));

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
  // Which revision each backend speaks, shared by both directions of the bridge between the eras.
  const eras = new BackendEras(store, app.log);
  const modern = { eras, sessions: new AdaptedSessions(store, coordinator), answers: new InputAnswers(coordinator), listens: new SessionListens() };
  const backends = backendClients(config, bridges, modern);
  const streams = new StreamRegistry();
  const metrics = new Metrics({ openStreams: () => streams.size, activeSessions: () => store.countSessions() });
  const sessions = new SessionService(
    store,
    config.sessions.idleTtl,
    (operation) => metrics.stateErrors.inc({ operation }),
    (change, userKey, sessionId) => coordinator.broadcast({ type: change, userKey, sessionId }),
    { maxPerUser: config.sessions.maxPerUser, onEvicted: (principal, evicted) => endEvictedSessions(ctx, principal, evicted, app.log) },
  );
  const exchange = createTokenExchange(config, store, metrics);
  const audit = decorateBackends(backends, config, metrics, exchange, options.auditSink);
  const readiness: Readiness = { draining: false };
  app.decorate('readiness', readiness);
  app.decorate('metrics', metrics);
  app.decorate('audit', audit);
  recordRouteMetrics(app, metrics);
  registerBodyHandling(app, config, metrics);

  // Before any route: it attaches itself to the /mcp… and /ws/mcp… routes as they are added.
  registerRateLimit(app, config, state.rateCounter, metrics);
  registerHealthRoutes(app, store, readiness);
  // With `metrics.listen`, /metrics has a listener of its own (server.ts) instead.
  if (!config.metrics.listen) registerMetricsRoute(app, metrics, config.metrics.bearerToken);
  registerOpenApiRoute(app);
  registerMetadataRoutes(app, config);
  const originGuard = createOriginGuard(config);
  broker?.register(app, { store, originGuard, rateCounter: state.rateCounter });
  // The browser pages get the same Host/Origin checks as the MCP endpoint (DNS rebinding,
  // CSRF), attached to their routes as they are declared rather than tested on every request.
  app.addHook('onRoute', (route: RouteOptions) => {
    if (BROWSER_ROUTE.test(route.url)) route.onRequest = prependHook(route.onRequest, originGuard);
  });
  const ctx = buildMcpContext(app, { config, store, coordinator, sessions, backends, streams, metrics, ...(exchange ? { exchange } : {}) }, eras);
  app.decorate('mcp', ctx);
  if (audit) ctx.upstream.onElicit = (principal, backend, session, stepUp) => audit.linkRequired(principal, backend, session, stepUp);
  coordinator.onMessage((message) => onReplicaMessage(ctx, modern, message));
  const authenticate = createAuthenticate(config, verifier, (reason) => metrics.authFailures.inc({ reason }));
  registerMcpRoutes(app, ctx, { originGuard, authenticate });
  // `/ws/mcp[/{backend}]`: the same hooks judge the upgrade; each message then goes through `/mcp…` over loopback.
  await registerWebSocketTransport(app, config, { originGuard, authenticate });

  app.addHook('preClose', async () => {
    readiness.draining = true;
    await streams.drain(config.shutdown.drainTimeout);
  });
  app.addHook('onClose', async () => {
    sessions.close();
    ctx.parkedCalls.close();
    ctx.legacyStreams.close();
    await Promise.allSettled([...[...backends.values()].map((b) => b.close()), bridges.close(), audit?.close()]);
    await state.close();
  });
  return app;
}

/**
 * What every path to a backend goes through, innermost first: the token exchange (backends
 * with `tokenExchange`, src/exchange/), the tool lists (backends with `access.tools`), then
 * `policy.rules` and the audit trail (issue 30; when there are rules or an audit). Returns the
 * audit, undefined when it is off.
 */
function decorateBackends(backends: Map<string, McpBackend>, config: Config, metrics: Metrics, exchange: ReturnType<typeof createTokenExchange>, auditSink: AuditSink | undefined): Audit | undefined {
  if (exchange) exchangeForBackends(backends, exchange);
  applyToolPolicies(backends, metrics);
  return applyRulePolicies(backends, config, metrics, auditSink);
}

/**
 * One client per backend. A streamable-http backend may be of the 2026-07-28 era: its
 * 2025-11-25 clients get sessions kept by the gateway (backends/modern/); stdio and legacy SSE
 * backends are reached through the local bridge, which speaks the session era only.
 */
function backendClients(config: Config, bridges: LocalBridges, modern: ModernEraParts): Map<string, McpBackend> {
  return new Map(
    config.backends.map((b) => {
      const client = new StreamableHttpBackend(bridges.configFor(b));
      return [b.name, b.transport === 'streamable-http' ? new ModernEraBackend(client, modern) : client] as const;
    }),
  );
}

/** What another replica sent: to the layer it is about. */
function onReplicaMessage(ctx: McpContext, modern: ModernEraParts, message: ReplicaMessage): void {
  if (message.type === 'input-answer') modern.answers.receive(JSON.parse(message.message) as Record<string, unknown>, message);
  else if (message.type === 'adapted-changed') {
    modern.sessions.forget(message.sessionId);
    modern.listens.changed(message.userKey, message.sessionId);
  }
  else if (isBridgeMessage(message)) ctx.bridgeReplicas.handle(ctx, message);
  else handleReplicaMessage(ctx, message);
}
