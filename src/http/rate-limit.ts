/**
 * Per-user request rate limit on the MCP endpoints (`/mcp…` and the WebSocket upgrades on
 * `/ws/mcp…`): fixed windows of `limits.rateLimit.window`, `limits.rateLimit.max` requests
 * per user per window, counted across every MCP route and every backend together. Allowed
 * answers carry `x-ratelimit-limit/-remaining/-reset`; over the limit → HTTP 429 with
 * `Retry-After` (seconds), the same headers and a JSON-RPC error body
 * ({@link ErrorCode.RateLimited}) with a null id (JSON-RPC 2.0 §5: the request was refused
 * before its body, and so its id, was read).
 *
 * Keyed by the verified principal's `userKey` (iss+sub digest). It runs as the route's last
 * `onRequest` hook, after `authenticate` (unauthenticated requests were answered 401 already
 * and are never counted) and before the body is read (issue 13): a request is counted when
 * its headers arrive, so bodies that are slow or never finish count against the user like
 * any other request, and a user over the limit costs no upload. It is attached by URL, in an
 * `onRoute` hook, to every route under `/mcp` or `/ws/mcp` registered after
 * {@link registerRateLimit}, whichever module declares it; health, metrics, OpenAPI,
 * metadata and browser pages are untouched.
 *
 * State: the counter is part of the gateway's state (state/create-state.ts), given to
 * {@link registerRateLimit}. With a Redis state store the counters live in that same Redis,
 * on the store's own connection (no second connection), under `<redis.keyPrefix>rl:<userKey>`
 * (state/redis-keys.ts), so all replicas share one budget per user. Otherwise (in-memory
 * state, one replica) in process (LocalRateLimitStore); the state closes it.
 *
 * Performance: with Redis, requests are decided from local counts and the counts are synced
 * with Redis in the background, one script call per flush interval for all users
 * (BatchedRateLimitStore), so the limiter adds no Redis round trip to a request
 * (issue 7: at most one per proxied message). The price: other replicas' requests are seen up
 * to about two flush intervals late, so with several replicas a user can briefly exceed `max`
 * (bounded in that class's documentation). Operators who limit upstream set `enabled: false`.
 * The hook itself is a plain callback that the stores answer synchronously: no promise, no
 * per-request allocation beyond the headers. (It replaced `@fastify/rate-limit`, whose
 * generic handler cost about 8% of the gateway's CPU per proxied call in `bench:compare`.)
 *
 * Failure: if Redis fails or is slow, requests are still decided at once from the replica's
 * own counts (the limit becomes per replica: fail open for the cluster-wide count); a
 * limiter outage must never take the gateway down. Each failed or slow sync counts in
 * `switchboard_rate_limit_errors_total`; a warning is logged at most every
 * {@link WARN_EVERY_MS}.
 */
import type { FastifyInstance, onRequestHookHandler, RouteOptions } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import { ErrorCode, errorResponse } from '../wire/jsonrpc.js';
import type { RateLimitCount, RateLimitStore } from '../state/rate-limit-store.js';
import { appendHook } from './route-hooks.js';
import { headerValue } from '../wire/headers.js';
import { HEADER } from '../wire/protocol.js';
import { requestEra } from '../wire/revision-2026.js';

/** -32029 echoes HTTP 429 for sessions; a 2026-07-28 request gets a code outside that revision's reserved range. */
function rateLimitCode(version: string | string[] | undefined): number {
  return requestEra(headerValue(version)) === 'stateless' ? ErrorCode.RateLimitedStateless : ErrorCode.RateLimited;
}

/** At most one "limiter skipped" warning per this interval (an outage would flood the log). */
export const WARN_EVERY_MS = 30_000;

/** The routes limited: the MCP endpoints over HTTP and WebSocket, with or without a backend. */
const MCP_ROUTE = /^\/(ws\/)?mcp(\/|$)/;

/** True for the routes the limiter applies to (route URL templates, e.g. `/mcp/:backend`). */
export function isRateLimitedRoute(url: string): boolean {
  return MCP_ROUTE.test(url);
}

/**
 * Registers the limiter over `counts` (the state's rateCounter). Must be called before the
 * MCP routes are declared: it attaches itself to routes as they are added. The settings are
 * read on each request, so a config reload (docs/operations-reload.md) turns the limit on or
 * off or changes it at once; while `limits.rateLimit.enabled` is false the hook only returns.
 */
export function registerRateLimit(app: FastifyInstance, config: Config, counts: RateLimitStore, metrics: Metrics): void {

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
  counts.onFailure(onFailure);

  const limitHook: onRequestHookHandler = function (request, reply, done) {
    const key = request.principal?.userKey;
    const { enabled, max, window } = config.limits.rateLimit;
    // Only authenticated requests reach the hook; anything else is not ours to count.
    if (!key || !enabled) return done();
    let result: RateLimitCount | undefined;
    counts.incr(key, (error, count) => (result = error ? undefined : count), window, max);
    // A store that cannot answer skips the limit rather than refusing the request.
    if (!result) return done();
    const resetSeconds = Math.ceil(result.ttl / 1000);
    reply.header('x-ratelimit-limit', max);
    reply.header('x-ratelimit-reset', resetSeconds);
    if (result.current <= max) {
      reply.header('x-ratelimit-remaining', max - result.current);
      return done();
    }
    const retryAfter = Math.max(1, resetSeconds);
    metrics.rateLimited.inc({ route: request.routeOptions.url ?? 'unmatched' });
    request.log.info({ retryAfter }, 'rate limit exceeded');
    reply.header('x-ratelimit-remaining', 0);
    reply.header('retry-after', String(retryAfter));
    const code = rateLimitCode(request.headers[HEADER.protocolVersion]);
    // The audit trail records every refusal (issue 30 §2); nothing is done for it when it is off.
    app.audit?.refusal(request, 'limits.rateLimit', code);
    // Answered here: a callback hook that sends its reply does not call done().
    void reply
      .code(429)
      .type('application/json')
      .send(errorResponse(null, code, `Rate limit exceeded: retry in ${retryAfter} s`, { retryAfter }));
  };
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!isRateLimitedRoute(route.url)) return;
    route.onRequest = appendHook(route.onRequest, limitHook);
  });
}
