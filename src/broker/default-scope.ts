/**
 * The scope of an authorization request that names none (issue 28 §2).
 *
 * RFC 6749 §3.3 lets a client leave `scope` out; the server then applies its default. MCP
 * clients do exactly that when the gateway advertises no scope (RFC 9728 `scopes_supported`
 * empty: the default config, no `auth.scopes`), as the MCP SDK's client does. The default is
 * `auth.scopes` (else `auth.requiredScopes`, as in the metadata, SPEC §8).
 *
 * When that default is empty too, the grant would hold nothing, and oidc-provider 8 answers
 * `access_denied` to an authorization that grants no scope at all
 * (lib/actions/authorization/interactions.js: "resolved without requesting interactions but
 * no scope was granted"), after the user has signed in and allowed. So the broker asks for
 * `openid` on the client's behalf: the only scope the provider always knows and never drops
 * (`offline_access` is dropped without `prompt=consent`, OIDC Core §11), and it discloses
 * nothing new — its ID token carries only `sub` (provider.ts `claims`), which the access
 * token carries already. The access token's `scope` stays empty: it names resource scopes only.
 */
import type { Config } from '../config/schema.js';

/** The OIDC scope that keeps oidc-provider from refusing a grant of no scope. */
export const NO_SCOPE_PLACEHOLDER = 'openid';

/** What an authorization request without `scope` is given (space-separated, never empty). */
export function defaultAuthorizationScope(config: Config): string {
  const configured = config.auth.scopes ?? config.auth.requiredScopes;
  return configured.length ? configured.join(' ') : NO_SCOPE_PLACEHOLDER;
}
