/**
 * What a reload cannot change in a running gateway (issue 32 §1 "What needs a restart"), and
 * how a new file is judged against it. Everything not named here is replaced live
 * (config/live-config.ts); a key added to the schema later reloads unless it is added here.
 *
 * Each entry is built into something made once at start: the listening socket (`listen`),
 * the Redis connections (`redis`), every resource URL and cookie (`publicUrl`), the token
 * verifier, the browser sign-in and the broker (`auth`), what is sealed or signed
 * (`secrets`), the metrics listener (`metrics`), the HTTP server's body limits
 * (`limits.maxBodyBytes`, `limits.bodyTimeout`), the Host/Origin guard (`allowedOrigins`,
 * `allowedHosts`), the session service's TTL (`sessions.idleTtl`), the local bridge
 * (`bridge`, and every stdio or legacy SSE backend). Backends with `upstreamAuth` reload: the
 * account-linking pages read the live config (connect/browser-flows.ts). The audit sink and the first `policy.rules` reload
 * (ops/live-audit.ts; the rule face is on every backend, free while both are off). The
 * OpenTelemetry SDK (`telemetry`) is set up once.
 */
import { isDeepStrictEqual } from 'node:util';
import type { BackendConfig, Config } from '../config/schema.js';

/** Key paths whose change needs a restart, as they are written in the file. */
export const RESTART_ONLY_KEYS: readonly string[] = [
  'publicUrl',
  'listen',
  'redis',
  'auth',
  'secrets',
  'metrics',
  'allowedOrigins',
  'allowedHosts',
  'limits.maxBodyBytes',
  'limits.bodyTimeout',
  'sessions.idleTtl',
  'bridge',
  'admin',
  // The OpenTelemetry SDK and its exporters are set up once at start (src/telemetry/).
  'telemetry',
];

const valueAt = (config: Config, path: string): unknown => path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], config);

/** Backends reached through something started once for them (the local bridge). */
function builtAtStart(b: BackendConfig): boolean {
  return b.transport !== 'streamable-http';
}

/**
 * What in `next` differs from `current` where only a restart can apply it, as key paths
 * (`listen`, `backends.files`); empty when the reload may go ahead.
 */
export function restartOnlyChanges(current: Config, next: Config): string[] {
  const changed = RESTART_ONLY_KEYS.filter((path) => !isDeepStrictEqual(valueAt(current, path), valueAt(next, path)));
  const before = new Map(current.backends.map((b) => [b.name, b]));
  const after = new Map(next.backends.map((b) => [b.name, b]));
  for (const name of new Set([...before.keys(), ...after.keys()])) {
    const [was, is] = [before.get(name), after.get(name)];
    if (isDeepStrictEqual(was, is)) continue;
    if ((was && builtAtStart(was)) || (is && builtAtStart(is))) changed.push(`backends.${name}`);
  }
  return changed;
}

/**
 * `next` with the restart-only keys as the running gateway holds them. They are equal in the
 * file (else the reload was refused), but what was filled in at start stays (broker mode's
 * generated `secrets` for a single replica).
 */
export function withRunningRestartKeys(running: Config, next: Config): Config {
  const out = { ...next } as Record<string, unknown>;
  for (const path of RESTART_ONLY_KEYS) {
    const keys = path.split('.');
    let into = out;
    for (const key of keys.slice(0, -1)) into = into[key] = { ...(into[key] as Record<string, unknown>) };
    into[keys.at(-1)!] = valueAt(running, path);
  }
  return out as Config;
}
