/**
 * One exchange at the authorization server: the user's access token in, a token for one
 * backend out (SPEC §8 "Token exchange").
 *
 * - RFC 8693 §2.1: `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`, the user's
 *   token as `subject_token` of type `…:token-type:access_token`, an access token asked for
 *   (`requested_token_type`), and the backend named by `audience`, `resource` and `scope` as
 *   configured (Keycloak, Okta, PingFederate, and others).
 * - `preset: entra-obo`: Microsoft identity platform's on-behalf-of flow, RFC 7523's
 *   `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with the user's token as
 *   `assertion`, `requested_token_use=on_behalf_of`, and the API in `scope`
 *   (`api://<app-id>/.default`); it knows no `resource` or `audience`.
 *
 * Client authentication and the reading of the answer are provider-client.ts's, so neither
 * the user's token nor the client secret can reach an error message. A failure is sorted by
 * what would help ({@link classifyFailure}): `invalid_grant` means this user's token is no
 * longer good for exchange (signing in again gets a new one); an unreachable or slow
 * endpoint needs a retry later; any other refusal is the gateway's configuration.
 */
import type { Config } from '../config/schema.js';
import { ProviderError, requestTokens, type TokenEndpoint } from '../providers/provider-client.js';

export type TokenExchangeConfig = NonNullable<Config['backends'][number]['tokenExchange']>;

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

export interface ExchangedToken {
  accessToken: string;
  /** Epoch milliseconds; absent when the server did not say (`expires_in` is only RECOMMENDED). */
  expiresAt?: number;
}

/** Where the exchange goes and how the gateway authenticates there (exchange-endpoint.ts). */
export interface ExchangeEndpoint {
  tokenUrl: string;
  clientAuthentication: 'client_secret_basic' | 'client_secret_post';
}

/** The form body of the exchange request for this backend's configuration. */
export function exchangeBody(x: TokenExchangeConfig, subjectToken: string): URLSearchParams {
  const scope = x.scopes.join(' ');
  if (x.preset === 'entra-obo') {
    return new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion: subjectToken, requested_token_use: 'on_behalf_of', scope });
  }
  const body = new URLSearchParams({
    grant_type: TOKEN_EXCHANGE_GRANT,
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    requested_token_type: ACCESS_TOKEN_TYPE,
  });
  if (x.audience) body.set('audience', x.audience);
  if (x.resource) body.set('resource', x.resource);
  if (scope) body.set('scope', scope);
  return body;
}

/** A failed exchange: the message (no token in it) and what would help. */
export class ExchangeFailedError extends Error {
  constructor(
    message: string,
    readonly failure: ExchangeFailure,
  ) {
    super(message);
    this.name = 'ExchangeFailedError';
  }
}

/** Exchanges `subjectToken`; throws an ExchangeFailedError. */
export async function exchangeToken(endpoint: ExchangeEndpoint, x: TokenExchangeConfig, subjectToken: string, timeoutMs: number): Promise<ExchangedToken> {
  const client: TokenEndpoint = {
    tokenUrl: endpoint.tokenUrl,
    clientId: x.clientId,
    clientSecret: x.clientSecret,
    quirks: { clientAuthentication: endpoint.clientAuthentication },
  };
  let tokens;
  try {
    tokens = await requestTokens(client, exchangeBody(x, subjectToken), [subjectToken], { timeoutMs });
  } catch (err) {
    throw new ExchangeFailedError((err as Error).message, classifyFailure(err));
  }
  // Sent as `Authorization: Bearer`: anything else (RFC 8693 §2.2.1 `N_A` for a token that is
  // not an access token, a DPoP-bound token) would be refused by the backend anyway. The
  // server's policy for this client decides that: a configuration matter.
  if (tokens.tokenType.toLowerCase() !== 'bearer') {
    throw new ExchangeFailedError(`the exchange issued a token of type "${tokens.tokenType.replace(/[^\x20-\x7E]/g, ' ').slice(0, 20)}", not a Bearer access token`, { outcome: 'refused', signInAgain: false });
  }
  return { accessToken: tokens.accessToken, expiresAt: tokens.expiresAt };
}

/** How an exchange ended: the metric's `outcome` label. */
export type ExchangeOutcome = 'ok' | 'invalid_grant' | 'refused' | 'unavailable' | 'timeout';

/** What the client is told about a failed exchange. */
export interface ExchangeFailure {
  outcome: Exclude<ExchangeOutcome, 'ok'>;
  /** Whether the user signing in again (a new access token) could help. */
  signInAgain: boolean;
  /** The OAuth error code, when the server gave one (RFC 6749 §5.2). */
  oauthError?: string;
}

/** OAuth errors that say "later", not "never" (RFC 6749 §4.1.2.1 uses them at the token endpoint too, in practice). */
const TRANSIENT_OAUTH_ERRORS = new Set(['temporarily_unavailable', 'server_error']);

function classifyFailure(err: unknown): ExchangeFailure {
  if (!(err instanceof ProviderError)) return { outcome: 'unavailable', signInAgain: false };
  if (err.kind === 'timeout') return { outcome: 'timeout', signInAgain: false };
  if (err.kind === 'oauth') {
    if (err.oauthError === 'invalid_grant') return { outcome: 'invalid_grant', signInAgain: true, oauthError: err.oauthError };
    if (TRANSIENT_OAUTH_ERRORS.has(err.oauthError ?? '')) return { outcome: 'unavailable', signInAgain: false, oauthError: err.oauthError };
    return { outcome: 'refused', signInAgain: false, oauthError: err.oauthError };
  }
  return { outcome: 'unavailable', signInAgain: false };
}
