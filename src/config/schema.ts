/**
 * The YAML configuration contract (SPEC §3) as a zod schema. Parsing normalises what the
 * rest of the gateway needs (durations in ms, URLs without trailing slashes, defaults filled
 * in) so that no other module re-interprets raw config.
 */
import { approvalsSchema, auditSchema, policySchema } from './policy-schema.js';
import { telemetrySchema } from './telemetry-schema.js';
import { z } from 'zod';
import { redisSchema } from './redis-schema.js';
import { brokerModeIssues, brokerSchema } from './broker-schema.js';
import { statelessSchema } from './stateless-schema.js';
import { DURATION_JSON_SCHEMA, parseDuration } from './duration.js';
import { jsonHint } from './json-hints.js';
import { httpUrl } from './http-url.js';
import { upstreamAuthSchema } from './upstream-auth-schema.js';
import { trustProxySchema } from './trust-proxy-schema.js';
import { discoverySchema } from './discovery-schema.js';
import { serverIssues, serverSchema } from './servers-schema.js';
import { adminSchema, pinningSchema } from './pinning-schema.js';
import { reloadSchema } from './reload-schema.js';

const duration = (fallback: string) =>
  jsonHint(z.union([z.string(), z.number()]), { kind: 'replace', json: DURATION_JSON_SCHEMA })
    .default(fallback)
    .transform((value, ctx) => {
      const ms = parseDuration(value);
      if (ms === undefined) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: `"${value}" is not a duration (e.g. 30s, 5m, 24h)` });
        return z.NEVER;
      }
      return ms;
    });


/**
 * `${VAR}` is substituted into the parsed YAML, so a number supplied from the environment
 * arrives as a string ("8080"); accept such strings wherever a whole number is expected.
 */
const wholeNumber = () =>
  jsonHint(z.preprocess((v) => (typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v) : v), z.number().int()), { kind: 'wholeNumber' });

const trimSlash = (u: string) => u.replace(/\/+$/, '');

const backendName = z
  .string()
  .regex(/^[a-z0-9-]+$/, 'must match [a-z0-9-]+ (it becomes the path /mcp/{name})');

/** Presets of `backends[].tokenExchange` (src/exchange/exchange-grant.ts). */
export const TOKEN_EXCHANGE_PRESETS = ['entra-obo'] as const;

/**
 * `backends[].tokenExchange` (SPEC §8): the gateway exchanges the user's access token for
 * one meant for this backend — RFC 8693, or Microsoft's on-behalf-of flow with
 * `preset: entra-obo`. Without `tokenUrl`, the token endpoint in `auth.issuer`'s metadata.
 */
const tokenExchangeSchema = z
  .object({
    tokenUrl: httpUrl.optional(),
    clientId: z.string().min(1, 'must not be empty'),
    clientSecret: z.string().optional(),
    /** RFC 8693 §2.1 `audience`: the logical name of the backend at the authorization server. */
    audience: z.string().min(1, 'must not be empty').optional(),
    /** RFC 8693 §2.1 / RFC 8707 `resource`: an absolute URI naming the backend. */
    resource: z.string().url().optional(),
    scopes: z.array(z.string().min(1, 'must not be empty')).default([]),
    preset: z.enum(TOKEN_EXCHANGE_PRESETS).optional(),
  })
  .strict()
  .superRefine((x, ctx) => {
    const issue = (key: string, message: string) => ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message });
    if (x.preset === 'entra-obo') {
      // The on-behalf-of request names the API in `scope` only (Microsoft identity platform v2).
      if (x.resource) issue('resource', 'is not used by the Entra on-behalf-of flow; name the API in scopes, e.g. api://<app-id>/.default');
      if (x.audience) issue('audience', 'is not used by the Entra on-behalf-of flow; name the API in scopes, e.g. api://<app-id>/.default');
      if (!x.scopes.length) issue('scopes', 'is required with preset entra-obo, e.g. [api://<app-id>/.default]');
      if (!x.clientSecret) issue('clientSecret', 'is required with preset entra-obo (the on-behalf-of flow needs a confidential client)');
    } else if (!x.audience && !x.resource && !x.scopes.length) {
      issue('audience', 'an exchange needs a target: set audience, resource or scopes');
    }
  });

const backendSchema = z
  .object({
    name: backendName,
    url: httpUrl.optional(),
    transport: z.enum(['streamable-http', 'sse', 'stdio']).default('streamable-http'),
    command: z.string().optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string()).default({}),
    headers: z.record(z.string()).default({}),
    timeout: duration('60s'),
    /**
     * Which MCP era the gateway speaks to this backend (SPEC §8): `auto` probes it once with
     * `server/discover` (src/backends/era.ts); a revision pins it and skips the probe.
     */
    protocol: z.enum(['auto', '2026-07-28', '2025-11-25']).default('auto'),
    access: z
      .object({
        scopes: z.array(z.string()).default([]),
        tenants: z.array(z.string()).default([]),
        claims: z.record(z.array(z.string())).default({}),
        /** Tool allow/deny lists; `*` is a wildcard, deny wins (src/policy/tool-policy.ts). */
        tools: z
          .object({
            allow: z.array(z.string().min(1, 'must not be empty')).default([]),
            deny: z.array(z.string().min(1, 'must not be empty')).default([]),
          })
          .strict()
          .default({}),
      })
      .strict()
      .default({}),
    upstreamAuth: upstreamAuthSchema.optional(),
    tokenExchange: tokenExchangeSchema.optional(),
    /** Tool-definition pinning (issue 31 §2; pinning-schema.ts): off unless set. */
    pinning: pinningSchema.default({}),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (b.tokenExchange && b.upstreamAuth) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['tokenExchange'], message: 'cannot be combined with upstreamAuth: the backend gets either a token exchanged for the user or the user\'s linked third-party token' });
    }
    if (b.tokenExchange && b.transport !== 'streamable-http') {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['tokenExchange'], message: `needs transport streamable-http (a ${b.transport} backend is reached through the local bridge, which sends it no Authorization)` });
    }
    if (b.transport === 'stdio' && !b.command) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['command'], message: 'is required for transport stdio' });
    }
    if (b.protocol === '2026-07-28' && b.transport !== 'streamable-http') {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['protocol'], message: `2026-07-28 needs transport streamable-http (a ${b.transport} backend is reached through the local bridge, which speaks only the initialize-based revisions)` });
    }
    if (b.transport !== 'stdio' && !b.url) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['url'], message: `is required for transport ${b.transport}` });
    }
  });

export const SUPPORTED_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const;

export const configSchema = z
  .object({
    publicUrl: httpUrl.transform(trimSlash),
    listen: z
      .object({
        host: z.string().default('0.0.0.0'),
        port: wholeNumber().pipe(z.number().min(0).max(65535)).default(8080),
        /** The proxies in front (addresses, CIDRs) whose X-Forwarded-For names the client; the socket's address without it. */
        trustProxy: trustProxySchema.optional(),
      })
      .strict()
      .default({}),
    allowedOrigins: z.array(z.string().url().transform((u) => new URL(u).origin)).default([]),
    /** Extra Host header values accepted besides publicUrl's host (DNS-rebinding protection). */
    allowedHosts: z.array(z.string().min(1).transform((h) => h.toLowerCase())).default([]),
    /** Shared state: standalone, cluster or sentinel, with TLS (SPEC §8; redis-schema.ts). */
    redis: redisSchema(duration).optional(),
    auth: z
      .object({
        /**
         * `resource-server` (default): tokens come from `issuer`. `broker`: the gateway is the
         * authorization server its clients see (src/broker/); `issuer` and `login` name the
         * upstream identity provider where users sign in (SPEC §8 "Broker mode").
         */
        mode: z.enum(['resource-server', 'broker']).default('resource-server'),
        issuer: httpUrl.transform(trimSlash),
        audience: z.string().min(1),
        jwksUri: httpUrl.optional(),
        algorithms: z.array(z.enum(SUPPORTED_ALGORITHMS)).min(1).default(['RS256', 'ES256', 'EdDSA']),
        requiredScopes: z.array(z.string()).default([]),
        /** Scopes advertised in RFC 9728 metadata and 401 challenges; default `requiredScopes`. */
        scopes: z.array(z.string().min(1)).optional(),
        tenantClaim: z.string().optional(),
        clockTolerance: duration('30s'),
        login: z
          .object({
            clientId: z.string(),
            clientSecret: z.string().optional(),
            scopes: z.array(z.string()).default(['openid', 'profile']),
          })
          .strict()
          .optional(),
        /** The authorization server of `mode: broker` (broker-schema.ts); ignored in resource-server mode. */
        broker: brokerSchema(duration).default({}),
      })
      .strict(),
    secrets: z
      .object({
        cookieKey: z.string().min(32, 'must be at least 32 bytes').optional(),
        tokenKey: z.string().min(32, 'must be at least 32 bytes').optional(),
      })
      .strict()
      .default({}),
    sessions: z
      .object({
        /** At least 1 s: a session's store TTL (Redis refuses a TTL of 0; state/ttl.ts). */
        idleTtl: duration('24h').refine((ms) => ms >= 1_000, 'must be at least 1s'),
        /**
         * Live MCP sessions one user may hold; a further `initialize` ends one of that user's
         * sessions (as a DELETE would), so one user cannot fill the store (issue 13): the least
         * recently used idle one; one with an open stream or a call in flight only when none is
         * idle (SPEC §8 "Budgets", issue 28 §7).
         */
        maxPerUser: wholeNumber().pipe(z.number().min(1, 'must be at least 1')).default(100),
      })
      .strict()
      .default({}),
    /** What one user's MCP 2026-07-28 calls may hold through the bridge to 2025-11-25 backends (stateless-schema.ts). */
    stateless: statelessSchema(duration, wholeNumber).default({}),
    streams: z
      .object({
        keepAlive: duration('15s'),
        retry: duration('2s'),
        /** How many events of one SSE stream are kept for `Last-Event-ID` replay. */
        replayEvents: wholeNumber().pipe(z.number().min(1)).default(1000),
        /** How long those events are kept. */
        replayTtl: duration('10m').refine((ms) => ms >= 1_000, 'must be at least 1s'),
        /**
         * Bytes of one stream's replay log; past it the oldest events go (the stream still
         * delivers live; only resuming very old events is lost).
         */
        replayBytes: wholeNumber().pipe(z.number().min(1024, 'must be at least 1024 bytes')).default(1024 * 1024),
        /** Bytes of all of one user's replay logs together; past it their least recently used logs go. */
        replayBytesPerUser: wholeNumber().pipe(z.number().min(1024, 'must be at least 1024 bytes')).default(8 * 1024 * 1024),
        /** Most SSE streams one replica keeps open; further GETs get 503 (memory stays bounded). */
        maxOpen: wholeNumber().pipe(z.number().min(1)).default(20_000),
        /**
         * Most SSE streams one user keeps open on one replica; further GETs of that user get
         * 429, so that one user's idle streams cannot lock everyone else out of theirs.
         */
        maxPerUser: wholeNumber().pipe(z.number().min(1)).default(200),
        /**
         * Bytes an SSE stream may have waiting in the gateway for a client that does not read;
         * past it the stream is ended (the client resumes with Last-Event-ID). As the
         * WebSocket path's 16 MiB (src/transport/websocket-bridge.ts).
         */
        maxBufferedBytes: wholeNumber().pipe(z.number().min(64 * 1024, 'must be at least 65536 (64 KiB)')).default(16 * 1024 * 1024),
      })
      .strict()
      .default({}),
    limits: z
      .object({
        /** Largest accepted request body; larger → 413. */
        maxBodyBytes: wholeNumber().pipe(z.number().min(1024)).default(4 * 1024 * 1024),
        /** Time for a request to arrive whole (headers and body); slower → 408, socket closed. */
        bodyTimeout: duration('30s').refine((ms) => ms >= 1_000, 'must be at least 1s'),
        /**
         * Per-user request rate on the MCP endpoints (`/mcp…`, `/ws/mcp…`), counted in Redis
         * when configured: at most `max` requests per `window`; more → 429 with Retry-After.
         * On by default at 600 per minute (10/s sustained, far above interactive use).
         */
        rateLimit: z
          .object({
            enabled: z.boolean().default(true),
            max: wholeNumber().pipe(z.number().min(1)).default(600),
            window: duration('1m').refine((ms) => ms >= 1_000, 'must be at least 1s (Retry-After is in seconds)'),
          })
          .strict()
          .default({}),
      })
      .strict()
      .default({}),
    aggregate: z
      .object({
        /**
         * How long the aggregated endpoint `/mcp` waits for one backend while answering
         * initialize or a list page; a slower (or dead) backend's items are left out and logged.
         */
        fanoutTimeout: duration('5s'),
        /**
         * How often a backend that could not join an aggregated session at initialize is tried
         * again (on the session's next message, at most once per interval across replicas).
         */
        rejoinInterval: duration('30s').refine((ms) => ms >= 100, 'must be at least 100ms'),
      })
      .strict()
      .default({}),
    /**
     * The local bridge of stdio and legacy HTTP+SSE backends (src/backends/bridge/): each
     * session is a child process or an open connection, so they are capped per backend and
     * per user, and a session idle for `idleTimeout` ends (its child stops).
     */
    bridge: z
      .object({
        /** Bridge sessions of one backend for all users together; beyond it `initialize` gets 503. */
        maxSessions: wholeNumber().pipe(z.number().min(1, 'must be at least 1')).default(100),
        /** Bridge sessions of one backend for one user; beyond it that user's `initialize` gets 503. */
        maxSessionsPerUser: wholeNumber().pipe(z.number().min(1, 'must be at least 1')).default(10),
        /** A bridge session with no traffic and no open request for this long ends. */
        idleTimeout: duration('10m').refine((ms) => ms >= 1_000, 'must be at least 1s'),
      })
      .strict()
      .default({}),
    shutdown: z
      .object({
        /** On SIGTERM, how long in-flight calls may take to finish before the process exits. */
        drainTimeout: duration('20s'),
      })
      .strict()
      .default({}),
    metrics: z
      .object({
        /** Serve `/metrics` on its own listener (e.g. a port only Prometheus reaches) instead of the main port. */
        listen: z.object({ host: z.string().min(1).default('0.0.0.0'), port: wholeNumber().pipe(z.number().min(0).max(65535)) }).strict().optional(),
        /** When set, `/metrics` requires `Authorization: Bearer <it>` (use `${VAR}`). */
        bearerToken: z.string().min(16, 'must be at least 16 characters').optional(),
      })
      .strict()
      .default({}),
    /** Reading the file again when its directory changes (issue 41 §6; reload-schema.ts). */
    reload: reloadSchema(duration).default({}),
    /** CEL rules over every call to a backend (issue 30 §3; policy-schema.ts). */
    policy: policySchema.default({}),
    /** The audit trail of decisions (issue 30 §2; off by default). */
    audit: auditSchema.default({}),
    /** What `confirm` rules' requests also do: `notify`, a webhook for each new one (issue 46; policy-schema.ts). */
    approvals: approvalsSchema.default({}),
    /** The admin routes on the metrics listener (pinning-schema.ts). */
    admin: adminSchema.default({}),
    /** OpenTelemetry traces and metrics over OTLP/HTTP (issue 30 §1; telemetry-schema.ts); absent = off. */
    telemetry: telemetrySchema(duration).optional(),
    log: z.object({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') }).strict().default({}),
    backends: z.array(backendSchema).min(1, 'at least one backend is required'),
    /** Virtual servers at `/mcp/{name}`: chosen tools, prompts and resources of the backends (servers-schema.ts). */
    servers: z.array(serverSchema).default([]),
    /** Tool search on `/mcp` for big catalogs (issue 31 §3, discovery-schema.ts); absent: off. */
    discovery: discoverySchema.optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.streams.replayBytesPerUser < c.streams.replayBytes) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['streams', 'replayBytesPerUser'], message: `must be at least streams.replayBytes (${c.streams.replayBytes})` });
    }
    if (c.bridge.maxSessionsPerUser > c.bridge.maxSessions) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['bridge', 'maxSessionsPerUser'], message: `must be at most bridge.maxSessions (${c.bridge.maxSessions})` });
    }
    if (c.audit.sink === 'otlp' && !c.telemetry) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['audit', 'sink'], message: 'otlp needs telemetry.otlp.endpoint (the records go to {endpoint}/v1/logs)' });
    }
    // auth.mode broker: its client at the IdP, shared signing keys, an absolute audience (broker-schema.ts).
    for (const issue of brokerModeIssues(c)) ctx.addIssue({ code: z.ZodIssueCode.custom, ...issue });
    const linksAccounts = c.backends.some((b) => b.upstreamAuth);
    // Linking an account needs the user signed in in the browser (SPEC §4 step 3).
    if (linksAccounts && !c.auth.login) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['auth', 'login'], message: 'is required when backends use upstreamAuth (users sign in to link accounts)' });
    }
    // A call a confirm rule holds is approved on a signed-in page (issue 46; policy/confirm-hold.ts).
    if (!c.auth.login && c.policy.rules.some((r) => r.effect === 'confirm')) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['auth', 'login'], message: 'is required when a policy rule has effect confirm (the caller approves the call on a signed-in page)' });
    }
    // Several replicas must share the keys that seal tokens and sign cookies.
    if (c.redis && (linksAccounts || c.auth.login)) {
      for (const key of ['cookieKey', 'tokenKey'] as const) {
        if (!c.secrets[key]) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['secrets', key], message: 'is required with redis when browser sign-in or upstreamAuth is configured (replicas must share it)' });
      }
    }
    // Exchanged tokens are cached sealed in Redis for every replica (src/exchange/exchange-cache.ts).
    if (c.redis && !c.secrets.tokenKey && !linksAccounts && !c.auth.login && c.backends.some((b) => b.tokenExchange)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['secrets', 'tokenKey'], message: 'is required with redis when a backend has tokenExchange (replicas share the exchanged tokens, sealed with it)' });
    }
    if (c.metrics.listen && c.metrics.listen.port !== 0 && c.metrics.listen.port === c.listen.port) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['metrics', 'listen', 'port'], message: 'must differ from listen.port (leave metrics.listen out to serve /metrics on the main port)' });
    }
    const seen = new Set<string>();
    c.backends.forEach((b, i) => {
      if (seen.has(b.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['backends', i, 'name'], message: `duplicate backend name "${b.name}"` });
      seen.add(b.name);
      // Restricting a backend to tenants needs the claim that names the tenant (src/policy/backend-access.ts).
      if (b.access.tenants.length && !c.auth.tenantClaim) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['backends', i, 'access', 'tenants'], message: 'requires auth.tenantClaim (the token claim that names the tenant)' });
      }
      // stdio and legacy SSE backends are bridged per session in this process's memory
      // (src/backends/bridge/), so another replica could not serve those sessions (SPEC §1, §5).
      if (c.redis && (b.transport === 'stdio' || b.transport === 'sse')) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['backends', i, 'transport'], message: `${b.transport} backends keep per-session state in this process and cannot be used with redis (multi-replica) state; run a single replica without redis` });
      }
    });
    if (c.admin.token && !c.metrics.listen) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['admin', 'token'], message: 'needs metrics.listen (the admin routes are served on the metrics listener only, never on the public port)' });
    }
    for (const issue of serverIssues(c.servers, seen)) ctx.addIssue({ code: z.ZodIssueCode.custom, ...issue });
  });

export type Config = z.output<typeof configSchema>;
export type BackendConfig = Config['backends'][number];
export type UpstreamAuthConfig = NonNullable<BackendConfig['upstreamAuth']>;
export type ConfigInput = z.input<typeof configSchema>;
