/**
 * The `WWW-Authenticate` field of a backend's 401 (RFC 9110 §11.6.1), parsed into its
 * challenges (wire/www-authenticate.ts): where discovery finds the `resource_metadata` URL
 * (RFC 9728 §5.1) and the `scope` the backend asks for (MCP 2025-11-25 "Authorization", scope
 * selection) — of its Bearer challenge, or its DPoP one (RFC 9449 §7.1) for a backend that
 * wants DPoP-bound tokens.
 */
import { parseWwwAuthenticate } from '../wire/www-authenticate.js';

export { parseWwwAuthenticate, type Challenge } from '../wire/www-authenticate.js';

/** The schemes whose challenges carry a resource's `scope` and `error` (RFC 6750 §3, RFC 9449 §7.1). */
const TOKEN_SCHEMES = new Set(['bearer', 'dpop']);

/**
 * The scopes a backend's 403 asks for (RFC 6750 §3.1 `insufficient_scope`; MCP 2025-11-25
 * "Authorization", §Step-Up Authorization Flow): the `scope` of its Bearer (or DPoP) challenge
 * whose `error` is `insufficient_scope` (empty when it names none), or undefined when the field
 * holds no such challenge (a 403 for another reason).
 */
export function insufficientScope(header: string | string[] | undefined): string[] | undefined {
  const text = Array.isArray(header) ? header.join(', ') : header;
  if (!text) return undefined;
  const challenge = parseWwwAuthenticate(text).find((c) => TOKEN_SCHEMES.has(c.scheme) && c.params.error === 'insufficient_scope');
  return challenge && splitScopes(challenge.params.scope);
}

/**
 * The `scope` of a backend's Bearer challenge, whatever its status and `error` (a 401 to a
 * token-less request, or to a refused token; MCP 2025-11-25 "Authorization", §Scope
 * Selection Strategy): undefined when the field holds no Bearer (or DPoP) challenge naming one.
 */
export function challengeScopes(header: string | string[] | undefined): string[] | undefined {
  const text = Array.isArray(header) ? header.join(', ') : header;
  const scope = text ? parseWwwAuthenticate(text).find((c) => TOKEN_SCHEMES.has(c.scheme) && c.params.scope !== undefined)?.params.scope : undefined;
  return scope === undefined ? undefined : splitScopes(scope);
}

/** A scope string as a list: space-separated (RFC 6749 §3.3), commas tolerated (Slack). */
export function splitScopes(scope: string | undefined): string[] {
  return (scope ?? '').split(/[\s,]+/).filter((s) => s !== '');
}
