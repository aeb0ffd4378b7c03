/**
 * Wiring: config → store → auth → backends → routes. Everything that owns a resource
 * releases it when the app closes; open SSE streams are told to `retry` and ended first so
 * that closing does not wait on them (SPEC §5, graceful shutdown).
 */
import { trackConnections } from './http/closing-connections.js';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RouteOptions } from 'fastify';
import type { JWTVerifyGetKey } from 'jose';
import { createAuthenticate } from './auth/authenticate.js';
import { registerMetadataRoutes } from './auth/metadata-routes.js';
import { allAudiences } from './auth/resources.js';
import { createTokenVerifier, type TokenVerifier } from './auth/token-verifier.js';
import { startLocalBridges } from './backends/bridge/local-bridges.js';
import type { McpBackend } from './backends/backend.js';
import type { Config } from './config/schema.js';
import { derived } from './config/live-config.js';
import type { McpContext } from './mcp/context.js';
import { createOriginGuard } from './http/origin-guard.js';
import { registerRateLimit } from './http/rate-limit.js';
import { registerMcpRoutes } from './mcp/routes.js';
import { buildMcpContext, virtualServerEndpoint } from './mcp/build-context.js';
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
import { isBridgeMessage, type PinsMessage, type ReplicaMessage } from './state/coordinator.js';
import { BackendEras } from './backends/era.js';
import { AdaptedSessions } from './backends/modern/adapted-sessions.js';
import { InputAnswers } from './backends/modern/input-answers.js';
import { SessionListens } from './backends/modern/session-listens.js';
import type { ModernEraParts } from './backends/modern/modern-era-backend.js';
import { buildBackends } from './reload/backend-set.js';
import { createConfigApplier, type ConfigApplier } from './reload/apply-config.js';
import { announceToolsChanged } from './reload/list-changes.js';
import { forgetToolSearchLists } from './discovery/discovery-backend.js';
import { prependHook } from './http/route-hooks.js';
import { registerWebSocketTransport } from './transport/websocket-routes.js';
import { BridgedClients } from './transport/bridged-clients.js';
import { createTokenExchange } from './exchange/token-exchange.js';
import { rulePolicyFace } from './policy/rule-policy-backend.js';
import type { Audit, AuditSink } from './ops/audit.js';
import { auditDropReporter } from './ops/audit-drops.js';
import { Pinning } from './pinning/pinning.js';
import { startTelemetry } from './telemetry/telemetry.js';

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
    /** Applies a validated config read again from the file (src/reload/; docs/operations-reload.md). */
    applyConfig: ConfigApplier;
    /** The audit trail; undefined when `audit.sink` is none (issue 30 §2). */
    audit: Audit | undefined;
    /** Tool-definition pinning (issue 31 §2): approvals by the admin route (server.ts). */
    pinning: Pinning;
  }
}

const BROWSER_ROUTE = /^\/(connect|oauth\/callback|login|logout|connections|approve|approvals)(\/|$)/;

/**
 * Broker mode (SPEC §8): the gateway is its clients' authorization server (src/broker/).
 * Loaded only in that mode: oidc-provider and its Koa stack cost about 0.4 s of CPU at every
 * start (docs/testing.md) that no other mode uses.
 */
async function loadBroker(config: Config, log: FastifyInstance['log']) {
  return config.auth.mode === 'broker' ? (await import('./broker/broker.js')).prepareBroker(config, log) : undefined;
}

export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(config, options.logStream));
  // As the file gave it, for the next reload to compare (a reload replaces `config`'s top level only).
  const loaded = { ...config };

  const broker = await loadBroker(config, app.log);
  if (broker) config = broker.config;
  // Store, coordinator and rate-limit counter, on one Redis connection (src/state/create-state.ts).
  const state = await createState(config, app.log, { store: options.store });
  const { store, coordinator } = state;
  const verifier: TokenVerifier = createTokenVerifier(
    broker?.verifierOptions ?? {
      issuer: config.auth.issuer,
      audience: derived(config, allAudiences),
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
  const streams = new StreamRegistry();
  const metrics = new Metrics({ openStreams: () => streams.size, activeSessions: () => store.countSessions(), storeWaits: (listener) => state.onStoreWait(listener) });
  const sessions = new SessionService(
    store,
    config.sessions.idleTtl,
    (operation) => metrics.stateErrors.inc({ operation }),
    (change, userKey, sessionId) => coordinator.broadcast({ type: change, userKey, sessionId }),
    { get maxPerUser() { return config.sessions.maxPerUser; } /* read per session: it reloads */, onEvicted: (principal, evicted) => endEvictedSessions(ctx, principal, evicted, app.log) },
  );
  const exchange = createTokenExchange(config, store, metrics);
  const { telemetry, audit, policyFace } = await observe(config, metrics, app.log, options.auditSink, store);
  // Tool-definition pinning (issue 31 §2), on every backend whose `pinning.mode` is not off.
  const pinning = new Pinning({ store, metrics, audit: () => audit.current, log: app.log, broadcast: (m) => coordinator.broadcast(m), listChanged: (backend) => toolsApproved(streams, config, ctx, backend) });
  const backendParts = { bridges, modern, exchange, metrics, policyFace, telemetry, pinningFace: (b: McpBackend) => pinning.face(b) };
  const backends = buildBackends(config, backendParts);
  const readiness: Readiness = { draining: false };
  app.decorate('readiness', readiness);
  app.decorate('metrics', metrics);
  // Read per use: a reload may open another sink, or turn the audit on or off (ops/live-audit.ts).
  app.decorate('audit', { getter: () => audit.current });
  app.decorate('pinning', pinning);
  app.decorate('telemetry', telemetry);
  recordRouteMetrics(app, metrics);
  registerBodyHandling(app, config, metrics);

  // Before any route, both attach themselves to routes as they are added: the WebSocket bridge's
  // loopback requests take their client's address and headers first (transport/bridged-clients.ts).
  const bridgedClients = new BridgedClients().attach(app);
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
  const ctx = buildMcpContext(app, { config, store, coordinator, sessions, backends, streams, metrics, exchange }, eras, broker ? (clientId) => broker.clientName(store, clientId) : undefined);
  app.decorate('mcp', ctx);
  app.decorate('applyConfig', createConfigApplier({ config, backends, parts: backendParts, aggregate: ctx.aggregate, servers: { servers: ctx.virtualServers, build: (s, i) => virtualServerEndpoint(ctx, s, i) }, sessions, streams, eras, log: app.log }, loaded));
  ctx.upstream.onElicit = (principal, backend, session, stepUp) => audit.current?.linkRequired(principal, backend, session, stepUp);
  coordinator.onMessage((message) => (message.type === 'pins-changed' ? pinning.received(message) : onReplicaMessage(ctx, modern, message)));
  const authenticate = createAuthenticate(config, verifier, (reason) => metrics.authFailures.inc({ reason }));
  registerMcpRoutes(app, ctx, { originGuard, authenticate });
  // `/ws/mcp[/{backend}]`: the same hooks judge the upgrade; each message then goes through `/mcp…` over loopback.
  await registerWebSocketTransport(app, config, { originGuard, authenticate }, bridgedClients);
  // The backends as they are at close: a reload may have added some (src/reload/).
  releaseOnClose(app, config, { readiness, streams, sessions, ctx, closers: [() => Promise.allSettled([...backends.values()].map((b) => b.close(0))), () => bridges.close(), () => audit.close(), () => pinning.close(), async () => telemetry?.shutdown()], state });
  return app;
}

/**
 * OpenTelemetry (issue 30 §1: the SDK is loaded only when `telemetry` is configured), and
 * `policy.rules` with the audit trail (issue 30), whose face goes outermost on every backend
 * (free while both are off). `audit.sink: otlp` writes through the telemetry's OTLP log sink,
 * made once: `telemetry` needs a restart, so that sink outlives any reload of `audit`.
 */
async function observe(config: Config, metrics: Metrics, log: FastifyBaseLogger, override: AuditSink | undefined, store: StateStore) {
  const telemetry = await startTelemetry(config, log, (reason, count) => metrics.telemetrySpansDropped.inc({ reason }, count));
  // Records a sink loses are counted and logged (ops/audit-drops.ts), whichever sink it is.
  const dropped = auditDropReporter(metrics.auditRecordsDropped, log);
  const otlp = telemetry ? await telemetry.auditSink(dropped('otlp')) : undefined;
  const { audit, face: policyFace } = rulePolicyFace(config, metrics, { override, otlp, dropped }, store, log);
  return { telemetry, audit, policyFace };
}

/**
 * A pin approval, heard by this replica (pinning/pinning.ts): its live sessions and open 2026
 * listens of the endpoints that reach `backend` are told (reload/list-changes.ts), and the
 * tool-search lists it keeps are read again at the next search (discovery/).
 */
function toolsApproved(streams: StreamRegistry, config: Config, ctx: McpContext, backend: string): void {
  announceToolsChanged(streams, config, backend);
  forgetToolSearchLists([ctx.aggregate, ...ctx.virtualServers.values()]);
}

/**
 * Closing: readiness turns to draining and open SSE streams are ended first (SPEC §5, graceful
 * shutdown), then everything that owns a resource releases it, the state connections last.
 */
function releaseOnClose(
  app: FastifyInstance,
  config: Config,
  parts: { readiness: Readiness; streams: StreamRegistry; sessions: SessionService; ctx: McpContext; closers: Array<() => Promise<unknown>>; state: { close(): Promise<void> } },
): void {
  const connections = trackConnections(app.server);
  let stopEnding: (() => void) | undefined;
  app.addHook('preClose', async () => {
    parts.readiness.draining = true;
    await parts.streams.drain(config.shutdown.drainTimeout);
    // Connections with nothing in progress must not hold the close (http/closing-connections.ts).
    stopEnding = connections.closing();
  });
  app.addHook('onClose', async () => {
    stopEnding?.();
    parts.sessions.close();
    parts.ctx.parkedCalls.close();
    parts.ctx.legacyStreams.close();
    await Promise.allSettled(parts.closers.map((close) => close()));
    await parts.state.close();
  });
}

/** What another replica sent: to the layer it is about. */
function onReplicaMessage(ctx: McpContext, modern: ModernEraParts, message: Exclude<ReplicaMessage, PinsMessage>): void {
  if (message.type === 'input-answer') modern.answers.receive(JSON.parse(message.message) as Record<string, unknown>, message);
  else if (message.type === 'adapted-changed') {
    // The replica that changed it has refreshed its own listens already (modern-era-backend.ts).
    if (message.from === ctx.coordinator.replicaId) return;
    modern.sessions.forget(message.sessionId);
    void modern.listens.changed(message.userKey, message.sessionId);
  }
  else if (isBridgeMessage(message)) ctx.bridgeReplicas.handle(ctx, message);
  else handleReplicaMessage(ctx, message);
}
