/**
 * The resources the broker issues tokens for (RFC 8707; MCP 2025-11-25 "Authorization"
 * §"Token Audience Binding and Validation"): exactly those the gateway accepts
 * (src/auth/resources.ts) — `auth.audience`, `<publicUrl>/mcp` and `<publicUrl>/mcp/{backend}`.
 * Any other `resource` is `invalid_target`. The token's `aud` is the resource the client asked
 * for, so a token for `/mcp/everything` opens that endpoint and no other; a request naming no
 * resource gets `auth.audience`, which opens every endpoint.
 *
 * Each resource knows the scopes a token for it may carry: `auth.scopes` (default
 * `auth.requiredScopes`), the required ones, and the backends' own `access.scopes` (all of
 * them for `/mcp` and `auth.audience`, which reach every backend). A scope nobody knows is
 * not granted; what a token lacks is refused later by the endpoint (403 `insufficient_scope`).
 */
import { errors, type ResourceServer } from 'oidc-provider';
import { advertisedScopes, endpointResource, namedEndpoints } from '../auth/resources.js';
import type { SigningAlgorithm } from '../config/broker-schema.js';
import type { Config } from '../config/schema.js';

export interface ResourceIndicatorsFeature {
  enabled: true;
  defaultResource: (ctx: unknown, client: unknown, oneOf?: string[]) => Promise<string | string[]>;
  getResourceServerInfo: (ctx: unknown, indicator: string) => Promise<ResourceServer>;
  useGrantedResource: () => Promise<boolean>;
}

/** Every scope the broker knows, per resource indicator. */
export function resourceScopes(config: Config): Map<string, string[]> {
  const everything = [...new Set([...config.auth.requiredScopes, ...config.backends.flatMap((b) => advertisedScopes(config, b))])];
  const scopes = new Map<string, string[]>([
    [config.auth.audience, everything],
    [endpointResource(config), everything],
  ]);
  // Backends and virtual servers (`servers`, issue 31 §1): each `/mcp/{name}` is a resource indicator.
  for (const e of namedEndpoints(config)) scopes.set(endpointResource(config, e.name), [...new Set([...config.auth.requiredScopes, ...e.advertised])]);
  return scopes;
}

/** oidc-provider's `features.resourceIndicators` for the gateway's resources. */
export function resourceIndicators(config: Config, signing: { alg: SigningAlgorithm; kid: string }): ResourceIndicatorsFeature {
  const known = resourceScopes(config);
  const accessTokenTTL = Math.round(config.auth.broker.accessTokenTtl / 1000);
  return {
    enabled: true,
    // No resource in the request: auth.audience. At the token endpoint, the one granted
    // (several granted and none named stays an error, as RFC 8707 §2.2 wants).
    defaultResource: async (_ctx, _client, oneOf) => oneOf ?? config.auth.audience,
    async getResourceServerInfo(_ctx, indicator) {
      const scopes = known.get(indicator);
      if (!scopes) throw new errors.InvalidTarget(`resource is not one of this gateway's MCP endpoints`);
      return { scope: scopes.join(' '), audience: indicator, accessTokenTTL, accessTokenFormat: 'jwt', jwt: { sign: signing } };
    },
    // A refresh without `resource` keeps the audience that was granted.
    useGrantedResource: async () => true,
  };
}
