/**
 * The OpenID Connect client of browser sign-in (SPEC §2 `/login/callback`, `auth.login`):
 * the issuer's endpoints, the authorization code exchange and the id_token check (OIDC Core
 * §3.1.3). Split from login-routes.ts, which holds the pages and cookies around it.
 *
 * The code exchange is the providers' token request (providers/provider-client.ts
 * `tokenResponse`), so sign-in gets the same handling as every other grant: redirects are
 * never followed, the answer is read up to 256 KiB, and the client secret and code never
 * reach a message. The id_token is verified against the issuer's JWKS: signature, algorithm
 * allowlist (`auth.algorithms`), `iss`, `aud` = client id, `azp`, `exp`, `nonce`.
 */
import { discoverIssuerMetadata } from '../auth/discovery.js';
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Config } from '../config/schema.js';
import { ProviderError, tokenResponse, type TokenEndpoint } from '../providers/provider-client.js';

const HTTP_TIMEOUT_MS = 10_000;

type LoginConfig = NonNullable<Config['auth']['login']>;

/** The sign-in endpoints from the issuer's metadata. */
export interface ProviderMetadata {
  issuer: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  jwksUri: string;
  /** `token_endpoint_auth_methods_supported`, when the metadata lists it. */
  authMethods?: string[];
}

/** The verified claims of a sign-in: an issuer and a subject at least. */
export type SignInClaims = JWTPayload & { iss: string; sub: string };

/** A failure while redeeming the code; `stage` says which step (for logs and the page). */
export class SignInError extends Error {
  constructor(
    readonly stage: 'discovery' | 'exchange' | 'id_token',
    message: string,
  ) {
    super(message);
  }
}

export interface OidcClient {
  metadata(): Promise<ProviderMetadata>;
  /** Exchanges the code and returns the verified id_token claims; throws SignInError. */
  redeem(o: { code: string; verifier: string; nonce: string; redirectUri: string }): Promise<SignInClaims>;
}

export function createOidcClient(config: Config, login: LoginConfig): OidcClient {
  let metadata: Promise<ProviderMetadata> | undefined;
  const keys = jwksCache();

  function getMetadata(): Promise<ProviderMetadata> {
    metadata ??= discover(config.auth.issuer).catch((err: unknown) => {
      metadata = undefined; // the issuer may just be starting: try again next time
      throw err;
    });
    return metadata;
  }

  return {
    metadata: getMetadata,
    async redeem({ code, verifier, nonce, redirectUri }) {
      let m: ProviderMetadata;
      try {
        m = await getMetadata();
      } catch (err) {
        throw new SignInError('discovery', (err as Error).message);
      }
      const body = await exchange(m, login, { code, verifier, redirectUri });
      const idToken = body.id_token;
      if (typeof idToken !== 'string') throw new SignInError('id_token', 'token response has no id_token');
      return verifyIdToken(idToken, keys(config.auth.jwksUri ?? m.jwksUri), { config, login, nonce });
    },
  };
}

/**
 * The authorization code grant (OAuth 2.1 §4.1.3, with the PKCE verifier) through the
 * providers' token request. A confidential client authenticates as the metadata allows:
 * `client_secret_basic` unless the issuer lists only `client_secret_post` (RFC 8414
 * `token_endpoint_auth_methods_supported`).
 */
async function exchange(m: ProviderMetadata, login: LoginConfig, o: { code: string; verifier: string; redirectUri: string }): Promise<Record<string, unknown>> {
  const methods = m.authMethods;
  const postOnly = methods !== undefined && !methods.includes('client_secret_basic') && methods.includes('client_secret_post');
  const endpoint: TokenEndpoint = {
    tokenUrl: m.tokenEndpoint,
    clientId: login.clientId,
    ...(login.clientSecret !== undefined ? { clientSecret: login.clientSecret } : {}),
    ...(postOnly ? { quirks: { clientAuthentication: 'client_secret_post' } } : {}),
  };
  const form = new URLSearchParams({ grant_type: 'authorization_code', code: o.code, redirect_uri: o.redirectUri, code_verifier: o.verifier });
  try {
    return await tokenResponse(endpoint, form, [o.code, o.verifier], { timeoutMs: HTTP_TIMEOUT_MS });
  } catch (err) {
    throw new SignInError('exchange', exchangeFailure(err));
  }
}

/**
 * What the log says of a failed exchange. An OAuth error is named by its status and code —
 * the code only when it is a plain `[a-z_]` word — without the server's description (the
 * sign-in log never carried provider text); other failures keep the provider client's
 * message, which names the endpoint's origin and path and nothing that was sent.
 */
function exchangeFailure(err: unknown): string {
  if (!(err instanceof ProviderError)) return `token endpoint unreachable: ${(err as Error | undefined)?.name ?? 'unknown error'}`;
  if (err.kind !== 'oauth') return err.message;
  const code = err.oauthError !== undefined && /^[a-z_]{1,64}$/.test(err.oauthError) ? err.oauthError : 'no error code';
  return `token endpoint answered HTTP ${err.status} (${code})`;
}

/** One remote key set, kept while the JWKS URI stays the same (jose caches and refreshes its keys). */
function jwksCache(): (uri: string) => JWTVerifyGetKey {
  let keys: { uri: string; set: JWTVerifyGetKey } | undefined;
  return (uri) => {
    if (keys?.uri !== uri) keys = { uri, set: createRemoteJWKSet(new URL(uri), { timeoutDuration: HTTP_TIMEOUT_MS }) };
    return keys.set;
  };
}

/** OIDC Core §3.1.3.7: the id_token's signature and claims, `azp` when present or needed, `nonce`. */
async function verifyIdToken(idToken: string, keys: JWTVerifyGetKey, o: { config: Config; login: LoginConfig; nonce: string }): Promise<SignInClaims> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(idToken, keys, {
      issuer: o.config.auth.issuer,
      audience: o.login.clientId,
      algorithms: o.config.auth.algorithms,
      clockTolerance: Math.round(o.config.auth.clockTolerance / 1000),
      requiredClaims: ['sub', 'exp', 'iat'],
    }));
  } catch (err) {
    throw new SignInError('id_token', `id_token rejected: ${(err as { code?: string }).code ?? (err as Error).name}`);
  }
  if (payload.nonce !== o.nonce) throw new SignInError('id_token', 'id_token nonce does not match');
  const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
  if ((payload.azp !== undefined || audiences.length > 1) && payload.azp !== o.login.clientId) {
    throw new SignInError('id_token', 'id_token azp is not this client');
  }
  if (typeof payload.sub !== 'string' || payload.sub === '' || typeof payload.iss !== 'string') {
    throw new SignInError('id_token', 'id_token has no subject');
  }
  return payload as SignInClaims;
}

/** The sign-in endpoints from the issuer's metadata (src/auth/discovery.ts). */
async function discover(issuer: string): Promise<ProviderMetadata> {
  const doc = await discoverIssuerMetadata(issuer, HTTP_TIMEOUT_MS, ['authorization_endpoint', 'token_endpoint', 'jwks_uri']);
  const methods = doc.token_endpoint_auth_methods_supported;
  return {
    issuer: doc.issuer,
    authorizationEndpoint: doc.authorization_endpoint as string,
    tokenEndpoint: doc.token_endpoint as string,
    jwksUri: doc.jwks_uri as string,
    ...(Array.isArray(methods) ? { authMethods: methods.filter((x): x is string => typeof x === 'string') } : {}),
  };
}
