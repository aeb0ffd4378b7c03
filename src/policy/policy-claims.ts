/**
 * The upstream claims that access policies read (`auth.tenantClaim`, `backends[].access.claims`,
 * src/policy/backend-access.ts; the `jwt.<name>` that `policy.rules` name), and only those: what a browser session keeps of a sign-in's
 * ID token and what broker mode copies into the gateway's own tokens (src/broker/grant-claims.ts).
 *
 * A policy claim may be a path such as `realm_access.roles`; its top-level member is carried
 * whole. The set is bounded (8 KiB of JSON): a larger one is dropped rather than making every
 * token that large, and policies then deny (fail closed).
 */
import type { Config } from '../config/schema.js';

const MAX_BYTES = 8 * 1024;
/** Claims the broker sets itself; an upstream value must never replace them. */
const RESERVED = new Set(['iss', 'sub', 'aud', 'exp', 'iat', 'nbf', 'jti', 'scope', 'client_id', 'cnf', 'auth_time', 'acr', 'amr']);

/** `jwt.groups`, `jwt["https://acme.example/groups"]`, `has(jwt.org)` in a `policy.rules` expression. */
const JWT_CLAIM = /\bjwt\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(?:"([^"]+)"|'([^']+)')\s*\])/g;

/** The claims `policy.rules` name (`jwt.<name>` or `jwt["<name>"]`), for broker tokens to carry (issue 30 §3). */
export function ruleClaimNames(config: Config): string[] {
  return config.policy.rules.flatMap((r) => [...r.when.matchAll(JWT_CLAIM)].map((m) => (m[1] ?? m[2] ?? m[3])!));
}

/** Top-level names of the claims that `auth.tenantClaim`, `backends[].access.claims`, `policy.rules` and their `approvers` (issue 46 four-eyes) read. */
export function policyClaimNames(config: Config): string[] {
  const approvers = config.policy.rules.flatMap((r) => Object.keys(r.approvers?.claims ?? {}));
  const names = [config.auth.tenantClaim, ...config.backends.flatMap((b) => Object.keys(b.access.claims)), ...ruleClaimNames(config), ...approvers].filter((n): n is string => !!n);
  // `realm_access.roles` is read from the top-level `realm_access` unless that exact name exists.
  return [...new Set(names.flatMap((n) => (n.includes('.') ? [n, n.split('.')[0]!] : [n])))].filter((n) => !RESERVED.has(n));
}

/** The policy claims present in `claims`, or {} when there are none or they are too large. */
export function pickClaims(claims: Readonly<Record<string, unknown>> | undefined, names: readonly string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  if (!claims) return picked;
  for (const name of names) if (Object.hasOwn(claims, name)) picked[name] = claims[name];
  return JSON.stringify(picked).length <= MAX_BYTES ? picked : {};
}

