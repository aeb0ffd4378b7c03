/**
 * Provider presets (SPEC §3 `upstreamAuth.preset`): the endpoints of the providers people
 * link most, and each one's documented departures from OAuth 2.1 as ProviderQuirks, so
 * that a backend needs only `preset`, `clientId`, `clientSecret` and `scopes`. Configured
 * values win over a preset's (tests and proxies point `authorizationUrl`/`tokenUrl`
 * elsewhere); the quirks stay, since they describe the provider rather than its address.
 *
 * What each preset handles, and where the provider documents it:
 *
 * - github — docs.github.com "Authorizing OAuth apps" and "Refreshing user access tokens":
 *   the token endpoint answers `application/x-www-form-urlencoded` unless sent
 *   `Accept: application/json` (we send it and read both); errors come with HTTP 200 and
 *   an `error` member (`bad_verification_code`, `bad_refresh_token`, the latter meaning
 *   `invalid_grant`); OAuth apps issue neither `refresh_token` nor `expires_in`, GitHub
 *   Apps with expiring tokens issue both (8 h; the refresh token rotates). Revocation is
 *   `DELETE /applications/{client_id}/grant`, not RFC 7009: no revocationUrl.
 * - google — developers.google.com/identity/protocols/oauth2/web-server: a refresh token
 *   only with `access_type=offline`, and again on a later consent only with
 *   `prompt=consent`; refresh responses carry no `refresh_token` (the old one stays, see
 *   refreshTokens); RFC 7009-style revocation at oauth2.googleapis.com/revoke.
 * - microsoft — learn.microsoft.com/entra/identity-platform/v2-oauth2-auth-code-flow:
 *   endpoints under `/{tenant}/oauth2/v2.0/` (`upstreamAuth.tenant`, default `common`);
 *   v2 names the API in the scopes (`api://<app-id>/.default`, Graph scopes) and refuses
 *   the v1 `resource` parameter, so RFC 8707 `resource` is never sent; a refresh token
 *   only with `offline_access` (added when missing); `scope` is required on refresh.
 * - atlassian — developer.atlassian.com/cloud/oauth/getting-started (3LO): `audience=
 *   api.atlassian.com` and `prompt=consent` on the authorization request; a refresh
 *   token only with `offline_access` (added); refresh tokens rotate on every use; the
 *   token request carries `client_id` and `client_secret` in the body.
 * - slack — docs.slack.dev/reference/methods/oauth.v2.access and /authentication/
 *   installing-with-oauth: user scopes go in `user_scope` (comma-separated), not `scope`,
 *   and the user's token comes nested under `authed_user` (a bot token, if any, stays at
 *   the top level and is ignored); errors are HTTP 200 with `{"ok": false, "error": …}`,
 *   `invalid_refresh_token` / `invalid_code` meaning `invalid_grant`. With token rotation
 *   enabled the user token carries `refresh_token` and `expires_in` (12 h).
 */
import type { BackendConfig } from '../config/schema.js';
import type { ProviderEndpoints, ProviderQuirks } from './provider-client.js';

type UpstreamAuthConfig = NonNullable<BackendConfig['upstreamAuth']>;
export type PresetName = NonNullable<UpstreamAuthConfig['preset']>;

export interface Preset {
  authorizationUrl(options: PresetOptions): string;
  tokenUrl(options: PresetOptions): string;
  /** RFC 7009 endpoint, only where the provider has one. */
  revocationUrl?: string;
  /** Scopes added to the configured ones when missing (what a refresh token needs). */
  addScopes?: readonly string[];
  quirks: ProviderQuirks;
}

export interface PresetOptions {
  /** Microsoft Entra tenant (`upstreamAuth.tenant`). */
  tenant: string;
}

const fixed = (url: string) => () => url;
const entra = (path: string) => (o: PresetOptions) => `https://login.microsoftonline.com/${encodeURIComponent(o.tenant)}/oauth2/v2.0/${path}`;

/** Every preset name of the config schema has an entry (the Record type checks it). */
export const PRESETS: Readonly<Record<PresetName, Preset>> = {
  github: {
    authorizationUrl: fixed('https://github.com/login/oauth/authorize'),
    tokenUrl: fixed('https://github.com/login/oauth/access_token'),
    quirks: {
      errorCodes: { bad_refresh_token: 'invalid_grant', bad_verification_code: 'invalid_grant' },
    },
  },
  google: {
    authorizationUrl: fixed('https://accounts.google.com/o/oauth2/v2/auth'),
    tokenUrl: fixed('https://oauth2.googleapis.com/token'),
    revocationUrl: 'https://oauth2.googleapis.com/revoke',
    quirks: {
      authorizationParams: { access_type: 'offline', prompt: 'consent' },
    },
  },
  microsoft: {
    authorizationUrl: entra('authorize'),
    tokenUrl: entra('token'),
    addScopes: ['offline_access'],
    quirks: { resourceIndicator: false, scopeOnRefresh: true },
  },
  atlassian: {
    authorizationUrl: fixed('https://auth.atlassian.com/authorize'),
    tokenUrl: fixed('https://auth.atlassian.com/oauth/token'),
    addScopes: ['offline_access'],
    quirks: {
      authorizationParams: { audience: 'api.atlassian.com', prompt: 'consent' },
      clientAuthentication: 'client_secret_post',
    },
  },
  slack: {
    authorizationUrl: fixed('https://slack.com/oauth/v2/authorize'),
    tokenUrl: fixed('https://slack.com/api/oauth.v2.access'),
    quirks: {
      scopeParameter: 'user_scope',
      scopeSeparator: ',',
      userTokenMember: 'authed_user',
      errorCodes: { invalid_refresh_token: 'invalid_grant', invalid_code: 'invalid_grant' },
    },
  },
};

/** The Microsoft tenant when `upstreamAuth.tenant` is not set: work, school and personal accounts. */
export const DEFAULT_TENANT = 'common';

/**
 * The provider of a backend configured without discovery: its configured endpoints, and
 * with a preset, the preset's for whatever is not configured plus the preset's quirks.
 * The config schema guarantees that the endpoints exist one way or the other.
 */
export function configuredEndpoints(upstream: UpstreamAuthConfig): ProviderEndpoints {
  const preset = upstream.preset ? PRESETS[upstream.preset] : undefined;
  const options: PresetOptions = { tenant: upstream.tenant ?? DEFAULT_TENANT };
  const authorizationUrl = upstream.authorizationUrl ?? preset?.authorizationUrl(options);
  const tokenUrl = upstream.tokenUrl ?? preset?.tokenUrl(options);
  if (!authorizationUrl || !tokenUrl || !upstream.clientId) {
    throw new Error(`upstreamAuth for provider "${upstream.provider}" has no endpoints or clientId (configure them or a preset)`);
  }
  const scopes = [...upstream.scopes];
  for (const scope of preset?.addScopes ?? []) if (!scopes.includes(scope)) scopes.push(scope);
  const endpoints: ProviderEndpoints = {
    authorizationUrl,
    tokenUrl,
    revocationUrl: upstream.revocationUrl ?? preset?.revocationUrl,
    clientId: upstream.clientId,
    clientSecret: upstream.clientSecret,
    scopes,
    resource: preset?.quirks.resourceIndicator === false ? undefined : upstream.resource,
  };
  if (preset) endpoints.quirks = preset.quirks;
  return endpoints;
}
