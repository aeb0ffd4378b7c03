/**
 * Who may use a backend: `backends[].access` (SPEC §3 `access: { scopes, tenants, claims }`,
 * SPEC §1 "the backend servers the user may reach"). Pure functions over the verified token,
 * shared by the per-backend endpoint (backend-guard.ts) and the aggregated `/mcp`, which
 * leaves out the backends a user may not use.
 *
 * Claim values:
 * - a claim may hold one value or an array of values; any one matching is enough (issuers put
 *   `groups`, `roles` and sometimes the tenant in arrays);
 * - strings, numbers and booleans compare by their string form (`tenant_id: 42` matches
 *   `"42"` in YAML); objects and nulls never match; a string is not split on spaces;
 * - a claim name is first looked up as a top-level key, so namespaced claims such as
 *   `https://acme.example/groups` (which contain dots) work; only when there is no such key
 *   and the name contains dots is it read as a path into nested objects, e.g.
 *   `realm_access.roles` (Keycloak) → `claims.realm_access.roles`.
 *
 * Denial messages name the rule that failed and, for scopes and claims, the name the operator
 * configured (the user needs it to ask for access); never the allowed tenants or claim values,
 * and nothing from the token.
 */
import type { Principal } from '../auth/principal.js';
import type { BackendConfig } from '../config/schema.js';

export interface AccessDenial {
  reason: 'scope' | 'tenant' | 'claim';
  message: string;
}

/** undefined when the principal may use the backend. */
export function backendAccessDenial(principal: Principal, backend: BackendConfig, tenantClaim: string | undefined): AccessDenial | undefined {
  const { access } = backend;
  const missing = access.scopes.filter((s) => !principal.scopes.has(s));
  if (missing.length) {
    return { reason: 'scope', message: `Access denied to backend "${backend.name}": the token lacks scope ${missing.join(' ')}` };
  }
  if (access.tenants.length) {
    // Without tenantClaim there is no way to tell the tenant: fail closed. The config schema
    // refuses this combination, so this only guards callers that build configs by hand.
    const tenants = tenantClaim === undefined ? [] : claimValues(principal.claims, tenantClaim);
    if (!tenants.some((t) => access.tenants.includes(t))) {
      return { reason: 'tenant', message: `Access denied to backend "${backend.name}": it is not available to your tenant` };
    }
  }
  for (const [name, allowed] of Object.entries(access.claims)) {
    if (!claimValues(principal.claims, name).some((v) => allowed.includes(v))) {
      return { reason: 'claim', message: `Access denied to backend "${backend.name}": the token's "${name}" claim does not grant it` };
    }
  }
  return undefined;
}

/** The claim's values as strings (see the module comment); [] when absent or unusable. */
export function claimValues(claims: Readonly<Record<string, unknown>>, name: string): string[] {
  const value = Object.hasOwn(claims, name) ? claims[name] : name.includes('.') ? nested(claims, name.split('.')) : undefined;
  const values = Array.isArray(value) ? value : [value];
  return values.flatMap((v) => (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? [String(v)] : []));
}

function nested(value: unknown, path: string[]): unknown {
  for (const key of path) {
    if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}
