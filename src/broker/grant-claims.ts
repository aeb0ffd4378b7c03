/**
 * The upstream claims a broker token carries besides `sub`, so that access policies keep
 * working in broker mode (SPEC §8: "Tokens carry the upstream user's `sub` (and the tenant
 * claim)"): `auth.tenantClaim` and every claim a backend's `access.claims` names — nothing
 * else of the user's profile. They are taken when the user consents, kept with the grant
 * (`broker:claims:<grantId>`, as long as the grant lives) and copied into every access token
 * issued under it, refreshes included, so any replica issues the same token.
 *
 * A policy claim may be a path such as `realm_access.roles` (src/policy/backend-access.ts);
 * its top-level member is carried whole. The set is bounded (8 KiB of JSON): a larger one is
 * dropped rather than making every token that large, and policies then deny (fail closed).
 */
import type { Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';

const PREFIX = 'broker:claims:';
const MAX_BYTES = 8 * 1024;
/** Claims the broker sets itself; an upstream value must never replace them. */
const RESERVED = new Set(['iss', 'sub', 'aud', 'exp', 'iat', 'nbf', 'jti', 'scope', 'client_id', 'cnf', 'auth_time', 'acr', 'amr']);

/** Top-level names of the claims that `auth.tenantClaim` and `backends[].access.claims` read. */
export function policyClaimNames(config: Config): string[] {
  const names = [config.auth.tenantClaim, ...config.backends.flatMap((b) => Object.keys(b.access.claims))].filter((n): n is string => !!n);
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

export interface GrantClaims {
  save(grantId: string, claims: Record<string, unknown>, ttlMs: number): Promise<void>;
  /** The claims kept for a grant ({} when none). */
  load(grantId: string): Promise<Record<string, unknown>>;
}

export function createGrantClaims(store: StateStore): GrantClaims {
  return {
    async save(grantId, claims, ttlMs) {
      if (Object.keys(claims).length) await store.putValue(PREFIX + grantId, JSON.stringify(claims), ttlMs);
    },
    async load(grantId) {
      const raw = await store.getValue(PREFIX + grantId);
      return raw === undefined ? {} : (JSON.parse(raw) as Record<string, unknown>);
    },
  };
}
