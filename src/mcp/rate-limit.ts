/**
 * Per-user request rate limit on the MCP endpoints (`/mcp…` and the WebSocket upgrades on
 * `/ws/mcp…`), built on `@fastify/rate-limit`: fixed windows of `limits.rateLimit.window`,
 * `limits.rateLimit.max` requests per user per window, counted across every MCP route and
 * every backend together. Over the limit → HTTP 429 with `Retry-After` (seconds), the
 * plugin's `x-ratelimit-limit/-remaining/-reset` headers and a JSON-RPC error body
 * ({@link ErrorCode.RateLimited}).
 *
 * Keyed by the verified principal's `userKey` (iss+sub digest), so it runs as a preHandler,
 * after the `authenticate` onRequest hook (unauthenticated requests were answered 401
 * already and are never counted). It is attached by URL, in an `onRoute` hook, to every
 * route under `/mcp` or `/ws/mcp` registered after {@link registerRateLimit}, whichever
 * module declares it; health, metrics, OpenAPI, metadata and browser pages are untouched.
 *
 * State: with a Redis state store the counters live in that same Redis, on the store's own
 * connection (no second connection), under `<redis.keyPrefix>rl:<userKey>`, so all replicas
 * share one budget per user. Otherwise (in-memory state, one replica) in an in-process LRU.
 *
 * Performance: with Redis, requests are decided from local counts and the counts are synced
 * with Redis in the background, one script call per flush interval for all users
 * ({@link BatchedRateLimitStore}), so the limiter adds no Redis round trip to a request
 * (issue 7: at most one per proxied message). The price: other replicas' requests are seen up
 * to about two flush intervals late, so with several replicas a user can briefly exceed `max`
 * (bounded in that class's documentation). Operators who limit upstream set `enabled: false`.
 *
 * Failure: if Redis fails or is slow, requests are still decided at once from the replica's
 * own counts (the limit becomes per replica: fail open for the cluster-wide count); a
 * limiter outage must never take the gateway down. Each failed or slow sync counts in
 * `switchboard_rate_limit_errors_total`; a warning is logged at most every
 * {@link WARN_EVERY_MS}.
 */
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import { RedisStore } from '../state/redis-store.js';
import type { StateStore } from '../state/store.js';
import { BatchedRateLimitStore } from './batched-rate-limit-store.js';
import { ErrorCode, errorResponse, idOfJsonText } from './jsonrpc.js';
import { appendHook } from '../ops/route-hooks.js';

/** At most one "limiter skipped" warning per this interval (an outage would flood the log). */
export const WARN_EVERY_MS = 30_000;
/** Redis key namespace under the configured `redis.keyPrefix`. */
export const KEY_NAMESPACE = 'rl:';
/** Users tracked by the in-memory store (LRU); beyond that the least recent ones restart at 0. */
const MEMORY_USERS = 10_000;

/** The routes limited: the MCP endpoints over HTTP and WebSocket, with or without a backend. */
const MCP_ROUTE = /^\/(ws\/)?mcp(\/|$)/;

/** Thrown by the plugin's handler (errorResponseBuilder) and answered by {@link limitHook}. */
class RateLimited extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super(`Rate limit exceeded: retry in ${retryAfterSeconds} s`);
  }
}

/** True for the routes the limiter applies to (route URL templates, e.g. `/mcp/:backend`). */
export function isRateLimitedRoute(url: string): boolean {
  return MCP_ROUTE.test(url);
}

/**
 * Registers the limiter. Must be awaited before the MCP routes are declared: it attaches
 * itself to routes as they are added. Does nothing when `limits.rateLimit.enabled` is false.
 */
export async function registerRateLimit(app: FastifyInstance, config: Config, store: StateStore, metrics: Metrics): Promise<void> {
  const settings = config.limits.rateLimit;
  if (!settings.enabled) return;

  let lastWarning = 0;
  let skippedSinceWarning = 0;
  const onFailure = (reason: 'error' | 'timeout', error?: Error) => {
    metrics.rateLimitErrors.inc({ reason });
    skippedSinceWarning++;
    const now = Date.now();
    if (now - lastWarning < WARN_EVERY_MS) return;
    app.log.warn({ reason, err: error?.message, failures: skippedSinceWarning }, 'rate limiter cannot sync with Redis: MCP requests are limited per replica only');
    lastWarning = now;
    skippedSinceWarning = 0;
  };

  const options: RateLimitPluginOptions = {
    global: false,
    hook: 'preHandler',
    max: settings.max,
    timeWindow: settings.window,
    keyGenerator: (request) => request.principal?.userKey ?? '',
    // Only authenticated requests reach the hook; anything else is not ours to count.
    allowList: (request) => !request.principal,
    skipOnError: true,
    errorResponseBuilder: (_request, context) => new RateLimited(Math.max(1, Math.ceil(context.ttl / 1000))),
  };
  if (store instanceof RedisStore) {
    const redis = store.redis;
    const created: BatchedRateLimitStore[] = [];
    // The plugin constructs the store itself (`new Store(options)`).
    options.store = class SharedRedisStore extends BatchedRateLimitStore {
      constructor() {
        super({ redis, namespace: KEY_NAMESPACE, onFailure });
        created.push(this);
      }
    };
    // Stops its timers (and sends what is pending, if Redis is still connected).
    app.addHook('onClose', async () => {
      await Promise.allSettled(created.map((s) => s.close()));
    });
  } else {
    options.cache = MEMORY_USERS;
  }
  await app.register(rateLimit, options);

  // The plugin's handler with the global settings and store: one counter per user for all
  // MCP routes (per-route `config.rateLimit` would give each route its own counter).
  const check = app.rateLimit();
  const limitHook = async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      await check.call(app, request, reply);
    } catch (err) {
      if (!(err instanceof RateLimited)) throw err;
      metrics.rateLimited.inc({ route: request.routeOptions.url ?? 'unmatched' });
      request.log.info({ retryAfter: err.retryAfterSeconds }, 'rate limit exceeded');
      reply.header('retry-after', String(err.retryAfterSeconds));
      return reply.code(429).type('application/json').send(errorResponse(idOfJsonText(request.body), ErrorCode.RateLimited, err.message, { retryAfter: err.retryAfterSeconds }));
    }
  };
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!isRateLimitedRoute(route.url)) return;
    route.preHandler = appendHook(route.preHandler, limitHook);
  });
}
