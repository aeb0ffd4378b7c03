/**
 * The protected resources the gateway is (RFC 9728; RFC 8707; MCP 2025-11-25
 * "Authorization" §"Token Audience Binding and Validation"): one per MCP endpoint, named by
 * the URL a client connects to — `<publicUrl>/mcp` and `<publicUrl>/mcp/{backend}` — plus
 * the configured `auth.audience` that every endpoint accepts.
 *
 * RFC 9728 §3.3: the metadata at `/.well-known/oauth-protected-resource/mcp/{backend}` MUST
 * name the resource that URL was built from, so a client checking exactly accepts it. A
 * token made out to an endpoint's own identifier opens that endpoint and no other: a token
 * for `/mcp/everything` must not open `/mcp` or `/mcp/other`.
 */
import type { Config } from '../config/schema.js';

/** The resource identifier of an MCP endpoint (no backend: the aggregated `/mcp`). */
export function endpointResource(config: Config, backend?: string): string {
  return `${config.publicUrl}/mcp${backend ? `/${backend}` : ''}`;
}

/** The audiences a token for this endpoint may carry: the configured one and the endpoint's own. */
export function acceptedAudiences(config: Config, backend?: string): string[] {
  return [...new Set([config.auth.audience, endpointResource(config, backend)])];
}

/** Every audience some endpoint accepts (what the signature check lets through; the endpoint then checks its own). */
export function allAudiences(config: Config): string[] {
  return [...new Set([config.auth.audience, endpointResource(config), ...namedEndpoints(config).map((e) => endpointResource(config, e.name))])];
}

/** An endpoint `/mcp/{name}`: the scopes a token must carry, and those advertised (RFC 9728 `scopes_supported`, the challenge). */
export interface NamedEndpoint {
  name: string;
  required: string[];
  advertised: string[];
}

/**
 * Every `/mcp/{name}` endpoint: each backend, and each virtual server (`servers`, issue 31 §1),
 * a resource of its own like any endpoint. A virtual server requires what `/mcp` requires (a
 * member the token's scopes do not admit is left out, as on `/mcp`) and advertises its
 * members' scopes too, so a client asks for what they need.
 */
export function namedEndpoints(config: Config): NamedEndpoint[] {
  const backends = new Map(config.backends.map((b) => [b.name, b]));
  return [
    ...config.backends.map((b) => ({ name: b.name, required: [...config.auth.requiredScopes, ...b.access.scopes], advertised: advertisedScopes(config, b) })),
    ...config.servers.map((s) => {
      const members = new Set([...s.tools, ...s.prompts].map((e) => e.from.slice(0, e.from.indexOf('.'))).concat(s.resources.map((r) => r.from)));
      const scopes = [...members].flatMap((name) => backends.get(name)?.access.scopes ?? []);
      return { name: s.name, required: [...config.auth.requiredScopes], advertised: advertisedScopes(config, { access: { scopes } }) };
    }),
  ];
}

/**
 * The scopes advertised for an endpoint, in RFC 9728 `scopes_supported` and in the 401
 * challenge's `scope` (MCP 2025-11-25 "Scope Selection Strategy"): `auth.scopes` (default
 * `auth.requiredScopes`) and the backend's own required scopes. Without them a client asks
 * for no scope, which authorization servers that insist on one refuse.
 */
export function advertisedScopes(config: Config, backend?: { access: { scopes: string[] } }): string[] {
  return [...new Set([...(config.auth.scopes ?? config.auth.requiredScopes), ...(backend?.access.scopes ?? [])])];
}

/** Whether a verified token's `aud` (a string or an array, RFC 7519 §4.1.3) names one of `accepted`. */
export function audienceMatches(aud: unknown, accepted: readonly string[]): boolean {
  const values = Array.isArray(aud) ? aud : [aud];
  return values.some((v) => typeof v === 'string' && accepted.includes(v));
}
