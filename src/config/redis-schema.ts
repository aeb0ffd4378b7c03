/**
 * The `redis` config block (SPEC §3, §8 "Redis"; issue 17): where the shared state lives.
 * `mode: standalone` (default) uses `url`; `cluster` the seed `nodes`; `sentinel` the
 * `sentinels` and the monitored master's `name`. `tls` (CA, client certificate and key,
 * server name) applies in every mode; a `rediss://` URL or seed turns TLS on with the
 * system's CAs. `username` / `password` are the ACL user (usually `${VAR}`); credentials in
 * a URL are used when these are absent. The connection itself: src/state/redis-connection.ts.
 *
 * `unavailableWait` (issue 45 §1) is how long a request that needs the store waits while
 * the connection reconnects or fails over before it gets 503 (src/state/store-waits.ts); 0
 * fails at once.
 */
import { z } from 'zod';
import { jsonHint } from './json-hints.js';

const redisUrl = z.string().regex(/^rediss?:\/\/[^/\s]+/, 'must be a redis:// or rediss:// URL (for cluster or sentinel set redis.mode)');
const hostPort = z.string().regex(/^(\[[0-9A-Fa-f:.]+\]|[^\s:/[\]]+):\d{1,5}$/, 'must be host:port');

/** Keys that belong to one mode only: set in another, they are a mistake worth naming. */
const MODE_KEYS = { url: 'standalone', nodes: 'cluster', sentinels: 'sentinel', name: 'sentinel' } as const;

/**
 * The mode rules below that JSON Schema can state, for editors and the Helm chart's values
 * schema (config/json-schema.ts); the superRefine stays the authority and names the key.
 * (`properties` beside `required`: ajv's strict mode wants each required key declared.)
 */
const MODE_REQUIREMENTS = {
  allOf: [
    { if: { properties: { mode: { enum: ['cluster', 'sentinel'] } }, required: ['mode'] }, else: { properties: { url: {} }, required: ['url'] } },
    { if: { properties: { mode: { const: 'cluster' } }, required: ['mode'] }, then: { properties: { nodes: {} }, required: ['nodes'] } },
    { if: { properties: { mode: { const: 'sentinel' } }, required: ['mode'] }, then: { properties: { sentinels: {}, name: {} }, required: ['sentinels', 'name'] } },
  ],
};

type Duration = (fallback: string) => z.ZodType<number, z.ZodTypeDef, string | number | undefined>;

/** Built with the config's own duration type (schema.ts), which this file cannot import without a cycle. */
export const redisSchema = (duration: Duration) =>
  jsonHint(
    z
      .object({
        mode: z.enum(['standalone', 'cluster', 'sentinel']).default('standalone'),
        url: redisUrl.optional(),
        nodes: z.array(redisUrl).min(1).optional(),
        sentinels: z.array(hostPort).min(1).optional(),
        name: z.string().min(1).optional(),
        tls: z
          .object({
            /** File path of the CA bundle (or the PEM itself). */
            ca: z.string().min(1).optional(),
            servername: z.string().min(1).optional(),
            cert: z.string().min(1).optional(),
            key: z.string().min(1).optional(),
          })
          .strict()
          .optional(),
        username: z.string().min(1).optional(),
        password: z.string().min(1).optional(),
        keyPrefix: z.string().default('sb:'),
        /** How long a request waits for a reconnecting or failing-over Redis before 503; 0: not at all. */
        unavailableWait: duration('5s').refine((ms) => ms <= 60_000, 'must be at most 60s'),
      })
      .strict()
      .superRefine((r, ctx) => {
        const issue = (path: string[], message: string) => ctx.addIssue({ code: z.ZodIssueCode.custom, path, message });
        if (r.mode === 'standalone' && !r.url) issue(['url'], 'is required when redis.mode is standalone');
        if (r.mode === 'cluster' && !r.nodes) issue(['nodes'], 'is required when redis.mode is cluster (seed nodes, e.g. ["redis://redis-0:6379"])');
        if (r.mode === 'sentinel' && !r.sentinels) issue(['sentinels'], 'is required when redis.mode is sentinel (e.g. ["sentinel-0:26379"])');
        if (r.mode === 'sentinel' && !r.name) issue(['name'], "is required when redis.mode is sentinel (the monitored master's name)");
        for (const [key, mode] of Object.entries(MODE_KEYS)) {
          if (r[key as keyof typeof MODE_KEYS] !== undefined && r.mode !== mode) issue([key], `is used only when redis.mode is ${mode} (mode is ${r.mode})`);
        }
        if (r.tls && !r.tls.cert !== !r.tls.key) issue(['tls', r.tls.cert ? 'key' : 'cert'], 'is required with redis.tls.' + (r.tls.cert ? 'cert' : 'key') + ' (a client certificate and its key go together)');
        // In a cluster the user part of every key is a {hash tag}; braces in the prefix would be the tag instead.
        if (r.mode === 'cluster' && /[{}]/.test(r.keyPrefix)) issue(['keyPrefix'], 'must not contain { or } in cluster mode (the user part of each key is the hash tag)');
      }),
    { kind: 'extend', json: MODE_REQUIREMENTS },
  );

export type RedisConfig = z.infer<ReturnType<typeof redisSchema>>;
