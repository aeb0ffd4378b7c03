/**
 * The authorization server of broker mode (SPEC §8; issue 19): oidc-provider — an OpenID
 * Certified implementation, not a hand-written one — configured as the OAuth 2.1 server MCP
 * clients need, at `publicUrl` as issuer:
 * - authorization code with PKCE S256 only (required of every client), `response_type=code` only;
 * - refresh tokens for every client allowed the grant, rotated on each use; a replayed one
 *   ends the grant (store-adapter.ts, oidc-provider's refresh_token grant);
 * - RFC 7009 revocation (a refresh token's revocation ends its grant), RFC 8707 resource
 *   indicators bound into the JWT access token's `aud` (resource-servers.ts);
 * - RFC 7591 registration (`auth.broker.registration`) and Client ID Metadata Documents
 *   (`auth.broker.clientIdMetadataDocuments`, client-metadata-documents.ts);
 * - token endpoint authentication: only the methods a client can use here (clientAuthMethods);
 * - no userinfo, logout, PAR, DPoP or device flow: MCP clients need none, and a DPoP-bound
 *   token would be accepted by the gateway as a plain bearer token;
 * - every authorization is approved by the user on the consent page (interaction-routes.ts),
 *   never silently, because registered clients are anonymous (MCP "Security Best Practices"
 *   §"Confused Deputy Problem").
 * All state goes through the store adapter; cookies are signed with a key derived from
 * `secrets.cookieKey`, so every replica reads every cookie.
 */
import { hkdfSync } from 'node:crypto';
import Provider, { interactionPolicy, type ClientAuthMethod, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import { errorPage } from '../browser/pages.js';
import type { BrokerKeys } from './signing-keys.js';
import { createStoreAdapter, keepClient } from './store-adapter.js';
import { resourceIndicators, resourceScopes } from './resource-servers.js';
import type { GrantClaims } from './grant-claims.js';
import { guardedHttpOptions } from './outbound-guard.js';
import { rotateAfterResourceCheck } from './refresh-target.js';

/** Where the broker's endpoints live (the consent pages are served by interaction-routes.ts). */
export const BROKER_ROUTES = {
  authorization: '/oauth2/authorize',
  token: '/oauth2/token',
  registration: '/oauth2/register',
  revocation: '/oauth2/revoke',
  jwks: '/oauth2/jwks',
} as const;
export const INTERACTION_PATH = '/oauth2/interaction';

type Features = NonNullable<Configuration['features']>;

export interface BrokerProviderDeps {
  config: Config;
  store: StateStore;
  keys: BrokerKeys;
  grantClaims: GrantClaims;
  /** Client ID Metadata Documents, when enabled. */
  resolveClientUrl?: (id: string) => ReturnType<NonNullable<Parameters<typeof createStoreAdapter>[1]['resolveClientUrl']>>;
}

export function createBrokerProvider({ config, store, keys, grantClaims, resolveClientUrl }: BrokerProviderDeps): Provider {
  const broker = config.auth.broker;
  const seconds = (ms: number) => Math.max(1, Math.round(ms / 1000));
  const basePath = new URL(config.publicUrl).pathname.replace(/\/+$/, '');
  const configuration: Configuration = {
    adapter: createStoreAdapter(store, { clientTtlMs: broker.refreshTokenTtl, unusedClientTtlMs: broker.registrationLimits.unusedClientTtl, ...(resolveClientUrl ? { resolveClientUrl } : {}) }),
    jwks: { keys: keys.privateJwks as NonNullable<Configuration['jwks']>['keys'] },
    cookies: {
      keys: [Buffer.from(hkdfSync('sha256', Buffer.from(config.secrets.cookieKey!, 'utf8'), Buffer.alloc(0), 'switchboard broker cookies', 32)).toString('base64url')],
      names: { session: 'sb_as_session', interaction: 'sb_as_interaction', resume: 'sb_as_resume' },
      long: { httpOnly: true, sameSite: 'lax', signed: true },
      short: { httpOnly: true, sameSite: 'lax', signed: true },
    },
    routes: { ...BROKER_ROUTES },
    responseTypes: ['code'],
    pkce: { methods: ['S256'], required: () => true },
    // Every scope some resource knows: clients register with them (RFC 7591 `scope`).
    scopes: [...new Set(['openid', 'offline_access', ...[...resourceScopes(config).values()].flat()])],
    claims: { openid: ['sub'] },
    clientAuthMethods: clientAuthMethods(broker),
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], id_token_signed_response_alg: keys.signing.alg },
    // Public clients may call the token endpoint from a browser page served at their redirect URI.
    clientBasedCORS: (_ctx, origin, client) => origin !== 'null' && client.clientAuthMethod === 'none' && client.redirectUris!.some((u) => URL.parse(u)?.origin === origin),
    features: {
      devInteractions: { enabled: false },
      dPoP: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      userinfo: { enabled: false },
      // No registration access token: management (RFC 7592) is off, so it would open nothing.
      // (oidc-provider 8 has the option; its TypeScript types lack it.)
      registration: { enabled: broker.registration, initialAccessToken: false, issueRegistrationAccessToken: false } as Features['registration'],
      revocation: { enabled: true },
      resourceIndicators: resourceIndicators(config, keys.signing) as Features['resourceIndicators'],
    },
    // Every fetch the provider makes (jwks_uri, sector_identifier_uri) goes through the SSRF guard.
    httpOptions: guardedHttpOptions,
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    // The tenant and the other policy claims kept with the grant (grant-claims.ts).
    extraTokenClaims: async (_ctx, token) => (token.kind === 'AccessToken' && token.grantId ? grantClaims.load(token.grantId) : undefined),
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    // Rotated on every use, after the resource is checked (refresh-target.ts: a refused refresh keeps the token).
    rotateRefreshToken: rotateAfterResourceCheck(config),
    // A grant outlives the provider's own browser session: the gateway's session is what counts.
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: seconds(broker.accessTokenTtl),
      AuthorizationCode: 60,
      IdToken: seconds(broker.accessTokenTtl),
      Grant: seconds(broker.refreshTokenTtl),
      // A rotated token lives what remains of the first one's life: refreshing never extends the grant.
      RefreshToken: (ctx: KoaContextWithOIDC) => ctx?.oidc?.entities.RotatedRefreshToken?.remainingTTL ?? seconds(broker.refreshTokenTtl),
      Interaction: 10 * 60,
      Session: 60 * 60,
    },
    interactions: { url: (_ctx, interaction) => `${basePath}${INTERACTION_PATH}/${interaction.uid}`, policy: consentEveryTime() },
    renderError: async (ctx, out) => {
      const page = errorPage({ status: ctx.status >= 400 ? ctx.status : 400, title: 'Authorization refused', detail: `Your MCP client's request could not be accepted (${out.error}: ${out.error_description ?? 'no description'}).` });
      ctx.status = page.status;
      ctx.set(page.headers);
      ctx.body = page.html;
    },
  };
  const provider = new Provider(config.publicUrl, configuration);
  // A registered client that obtains a token is kept like any used client (store-adapter.ts).
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    const clientId = ctx.oidc.client?.clientId;
    if (clientId) keepClient(store, clientId, broker.refreshTokenTtl).catch((err: Error) => provider.emit('server_error', ctx, err));
  });
  // Requests reach the provider through the gateway, which sets X-Forwarded-Proto/Host from publicUrl (mount.ts).
  provider.proxy = true;
  return provider;
}

/**
 * The token endpoint's authentication methods, and so RFC 8414
 * `token_endpoint_auth_methods_supported` (issue 41 §7): only those some client can use here.
 * `none` for public clients (what MCP clients are); `client_secret_basic`, `_post` and `_jwt`
 * need a secret, which only RFC 7591 registration issues; `private_key_jwt` needs the client's
 * public keys, which only a Client ID Metadata Document may carry (a registration may not:
 * registration-rules.ts), as `jwks` or a `jwks_uri` fetched through the SSRF guard.
 */
export function clientAuthMethods(broker: Pick<Config['auth']['broker'], 'registration' | 'clientIdMetadataDocuments'>): ClientAuthMethod[] {
  const secrets: ClientAuthMethod[] = ['client_secret_basic', 'client_secret_post', 'client_secret_jwt'];
  return ['none', ...(broker.registration ? secrets : []), ...(broker.clientIdMetadataDocuments ? (['private_key_jwt'] as const) : [])];
}

/**
 * oidc-provider's default policy, with one more consent check: every authorization shows the
 * consent page until the user answers it, even when an earlier grant already covers it.
 */
function consentEveryTime() {
  const { base, Check } = interactionPolicy;
  const policy = base();
  policy.get('consent')!.checks.add(
    new Check('switchboard_consent', 'the user approves every authorization of an MCP client', (ctx) => (ctx.oidc.result?.consent ? Check.NO_NEED_TO_PROMPT : Check.REQUEST_PROMPT)),
  );
  return policy;
}
