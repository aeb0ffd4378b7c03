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
  return [...new Set([config.auth.audience, endpointResource(config), ...config.backends.map((b) => endpointResource(config, b.name))])];
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
