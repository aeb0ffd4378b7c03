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
import type { StateStore } from '../state/store.js';

export { pickClaims, policyClaimNames } from '../policy/policy-claims.js';
import { ValueKeys } from '../state/value-keys.js';

export interface GrantClaims {
  save(grantId: string, claims: Record<string, unknown>, ttlMs: number): Promise<void>;
  /** The claims kept for a grant ({} when none). */
  load(grantId: string): Promise<Record<string, unknown>>;
}

export function createGrantClaims(store: StateStore): GrantClaims {
  return {
    async save(grantId, claims, ttlMs) {
      if (Object.keys(claims).length) await store.putValue(ValueKeys.brokerGrantClaims(grantId), JSON.stringify(claims), ttlMs);
    },
    async load(grantId) {
      const raw = await store.getValue(ValueKeys.brokerGrantClaims(grantId));
      return raw === undefined ? {} : (JSON.parse(raw) as Record<string, unknown>);
    },
  };
}
