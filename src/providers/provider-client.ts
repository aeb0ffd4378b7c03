/**
 * OAuth 2.1 client for a third-party provider (SPEC §4 steps 3–5): the authorization
 * request with PKCE, the code exchange, refresh and revocation. Plain functions over the
 * provider's endpoints; no state of their own (the caller keeps `state` and the PKCE
 * verifier, the vault keeps the tokens).
 *
 * Security: token values, codes, verifiers and the client secret never appear in an error
 * message. A provider's `error_description` is shown only after removing anything we sent
 * and anything outside printable ASCII, and truncated.
 *
 * Refs: OAuth 2.1 (draft-ietf-oauth-v2-1) §4.1 and §4.3; RFC 6749 §2.3.1 (client
 * authentication), §5.1/§5.2 (token responses); RFC 7636 (PKCE); RFC 7009 (revocation);
 * RFC 8707 (resource indicators).
 *
 * Providers that deviate from those (GitHub, Google, Microsoft, Atlassian, Slack) describe
 * their deviations as {@link ProviderQuirks}; provider-presets.ts holds them per provider.
 */
import { createHash, randomBytes } from 'node:crypto';
import { errorCauseCode } from '../wire/error-cause.js';
import { errorAnswer, ProviderError, tokenAnswer, toTokens, type ProviderAnswer } from './provider-response.js';
import { SafeFetchError } from './safe-fetch.js';
import type { DpopKey, DpopPrivateJwk } from '../backends/dpop.js';
import { checkTokenType, postWithProof } from './dpop-token.js';

export { ProviderError, type ProviderErrorKind } from './provider-response.js';

export interface ProviderTokens {
  accessToken: string;
  refreshToken?: string;
  /** Epoch milliseconds; absent when the provider did not say (`expires_in` omitted). */
  expiresAt?: number;
  scope?: string;
  tokenType: string;
  /**
   * The issuer of the authorization server that issued them (RFC 8414 `issuer`), when it was
   * discovered: a backend that moved to another server no longer takes them (SEP-2352).
   */
  issuer?: string;
  /**
   * The private key of the link's DPoP key pair (RFC 9449; backends/dpop.ts), when the link was
   * made at a server that takes DPoP: sealed with the tokens, as the refresh token is, never logged.
   */
  dpopKey?: DpopPrivateJwk;
}

export interface ProviderEndpoints {
  authorizationUrl: string;
  tokenUrl: string;
  revocationUrl?: string;
  clientId: string;
  clientSecret?: string;
  scopes: string[];
  /** RFC 8707 resource indicator (sent when the provider is an MCP-protected backend). */
  resource?: string;
  /**
   * RFC 9207: the authorization server's issuer identifier (its metadata `issuer`), when
   * known. An `iss` in the authorization response must equal it (mix-up defence).
   */
  issuer?: string;
  /** RFC 9207 §3: the metadata advertises `authorization_response_iss_parameter_supported`, so `iss` is required. */
  requireIssParameter?: boolean;
  /**
   * How this client authenticates at the token endpoint (RFC 7591 §2, RFC 8414 §2
   * `token_endpoint_auth_method`): what the registration and the server's metadata agreed
   * on (provider-endpoints.ts). Absent: `client_secret_basic` when a secret is held (or the
   * preset's {@link ProviderQuirks.clientAuthentication}), else a public client.
   */
  tokenEndpointAuthMethod?: TokenEndpointAuthMethod;
  /** How this provider departs from OAuth 2.1 (a preset's); absent = by the book. */
  quirks?: ProviderQuirks;
  /**
   * The authorization server (or the backend's RFC 9728 metadata) takes DPoP proofs with ES256
   * (`dpop_signing_alg_values_supported`): a link holds a key and proves it (RFC 9449);
   * `boundTokensRequired`: the backend's `dpop_bound_access_tokens_required`.
   */
  dpop?: { boundTokensRequired: boolean };
}

/** The token endpoint authentication methods the gateway speaks (RFC 6749 §2.3.1, OAuth 2.1 §2.4). */
export type TokenEndpointAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

/**
 * A provider's documented departures from OAuth 2.1, as data: each field names one, and
 * leaving it out means the standard behaviour. Filled by provider-presets.ts.
 */
export interface ProviderQuirks {
  /**
   * Extra authorization request parameters (Google `access_type=offline`, Atlassian
   * `audience`). A parameter already in the configured authorization URL is left as it is.
   */
  authorizationParams?: Readonly<Record<string, string>>;
  /** The authorization parameter that carries the scopes (default `scope`; Slack user tokens: `user_scope`). */
  scopeParameter?: string;
  /** How scopes are joined (default a space, RFC 6749 §3.3; Slack documents commas). */
  scopeSeparator?: string;
  /** Send the scopes with refresh requests too (Microsoft documents `scope` as required there). */
  scopeOnRefresh?: boolean;
  /** false: never send the RFC 8707 `resource` (Microsoft identity platform v2 refuses it). */
  resourceIndicator?: false;
  /**
   * Client authentication at the token endpoint: `client_secret_basic` (default, RFC 6749
   * §2.3.1) or `client_secret_post` (id and secret in the body, as Atlassian documents).
   */
  clientAuthentication?: 'client_secret_basic' | 'client_secret_post';
  /**
   * The member of a successful token response that holds the user's token when the
   * provider nests it (Slack: `authed_user`, beside a possible bot token at the top level).
   * A response without it (Slack's refresh responses) is read at the top level.
   */
  userTokenMember?: string;
  /**
   * Provider error codes and the RFC 6749 §5.2 code they mean (GitHub `bad_refresh_token`,
   * Slack `invalid_refresh_token` → `invalid_grant`), so that a dead refresh token unlinks
   * the account instead of failing every call.
   */
  errorCodes?: Readonly<Record<string, string>>;
}

/** Per-call knobs; the defaults suit production. */
export interface ProviderRequestOptions {
  /** Whole request, body included (default 10 s). */
  timeoutMs?: number;
  /**
   * The fetch to use (default: global fetch). Pass an SSRF-guarded fetch (safe-fetch.ts)
   * for endpoints that came from discovery rather than from configuration.
   */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** The link's DPoP key: the request carries a proof of it (RFC 9449 §5; dpop-token.ts). */
  dpop?: DpopKey;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** Token responses are small; an id_token makes them a few KiB at most. */
const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * A PKCE pair (RFC 7636 §4.1–4.2): a verifier of 32 random bytes (43 base64url
 * characters) and its S256 challenge, `BASE64URL(SHA256(ASCII(verifier)))`.
 */
export function createPkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier, 'ascii').digest('base64url');
  return { verifier, challenge };
}

/**
 * The URL to send the browser to (OAuth 2.1 §4.1.1): `response_type=code`, `client_id`,
 * `redirect_uri`, `scope` (space-separated; omitted when none are configured), `state`,
 * `code_challenge` with `code_challenge_method=S256`, and the RFC 8707 `resource` when set.
 * Query parameters already present in the configured URL are kept (some providers need
 * their own, e.g. `prompt=consent`); ours replace same-named ones. A preset's extra
 * parameters fill in only what the configured URL does not already say.
 */
export function authorizationRequestUrl(
  p: ProviderEndpoints,
  o: { redirectUri: string; state: string; codeChallenge: string },
): string {
  const url = new URL(p.authorizationUrl);
  const q = url.searchParams;
  const quirks = p.quirks ?? {};
  for (const [name, value] of Object.entries(quirks.authorizationParams ?? {})) if (!q.has(name)) q.set(name, value);
  q.set('response_type', 'code');
  q.set('client_id', p.clientId);
  q.set('redirect_uri', o.redirectUri);
  const scopeParameter = quirks.scopeParameter ?? 'scope';
  const scope = joinScopes(p, quirks.scopeSeparator);
  if (scope) q.set(scopeParameter, scope);
  else q.delete(scopeParameter);
  q.set('state', o.state);
  q.set('code_challenge', o.codeChallenge);
  q.set('code_challenge_method', 'S256');
  const resource = resourceOf(p);
  if (resource) q.set('resource', resource);
  return url.href;
}

/**
 * Exchanges an authorization code (OAuth 2.1 §4.1.3) with the PKCE verifier. When the
 * response omits `scope`, the granted scope is the requested one (RFC 6749 §5.1).
 */
export async function exchangeCode(
  p: ProviderEndpoints,
  o: { code: string; redirectUri: string; codeVerifier: string },
  options: ProviderRequestOptions = {},
): Promise<ProviderTokens> {
  const body = new URLSearchParams({ grant_type: 'authorization_code', code: o.code, redirect_uri: o.redirectUri, code_verifier: o.codeVerifier });
  const resource = resourceOf(p);
  if (resource) body.set('resource', resource);
  const startedAt = Date.now();
  const json = await tokenResponse(p, body, [o.code, o.codeVerifier], options);
  const tokens = checkTokenType(toTokens(json, startedAt), options.dpop !== undefined, p);
  const requested = joinScopes(p);
  if (tokens.scope === undefined && requested) tokens.scope = requested;
  return tokens;
}

/**
 * Refreshes (OAuth 2.1 §4.3). No `scope` parameter is sent, which asks for the scope
 * originally granted (unless the provider wants it: {@link ProviderQuirks.scopeOnRefresh}).
 * A provider that does not rotate refresh tokens (Google) omits `refresh_token` from the
 * response: the old one is kept. `scope` is returned only when the response has it (the
 * caller knows the previously granted scope).
 */
export async function refreshTokens(p: ProviderEndpoints, refreshToken: string, options: ProviderRequestOptions = {}): Promise<ProviderTokens> {
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken });
  const resource = resourceOf(p);
  if (resource) body.set('resource', resource);
  const scope = p.quirks?.scopeOnRefresh ? joinScopes(p) : '';
  if (scope) body.set('scope', scope);
  const startedAt = Date.now();
  const json = await tokenResponse(p, body, [refreshToken], options);
  const tokens = checkTokenType(toTokens(json, startedAt), options.dpop !== undefined, p);
  tokens.refreshToken ??= refreshToken;
  return tokens;
}

/**
 * Revokes a token (RFC 7009 §2.1). Returns false when the provider has no revocation
 * endpoint, true when it answered 200 (which it also does for unknown tokens, §2.2).
 * Errors are thrown as ProviderError; a caller that disconnects an account deletes its
 * copy whatever happens here.
 */
export async function revokeToken(
  p: ProviderEndpoints,
  token: string,
  hint: 'access_token' | 'refresh_token',
  options: ProviderRequestOptions = {},
): Promise<boolean> {
  if (!p.revocationUrl) return false;
  const body = new URLSearchParams({ token, token_type_hint: hint });
  const res = await post(p, p.revocationUrl, body, options, 'revocation');
  if (res.status === 200) return true;
  throw errorAnswer(res, [token, p.clientSecret], 'revocation', p.quirks);
}

/** What {@link requestTokens} needs of an endpoint: where, and how this client authenticates. */
export type TokenEndpoint = Pick<ProviderEndpoints, 'tokenUrl' | 'clientId' | 'clientSecret' | 'quirks' | 'tokenEndpointAuthMethod'>;

/**
 * Any other grant at a token endpoint — RFC 8693 token exchange, RFC 7523 JWT bearer
 * (src/exchange/) — with the same client authentication, hygiene and answer reading as the
 * grants above. `secrets`: what the body carries that must never reappear in a message.
 */
export async function requestTokens(p: TokenEndpoint, body: URLSearchParams, secrets: string[], options: ProviderRequestOptions = {}): Promise<ProviderTokens> {
  const startedAt = Date.now();
  return checkTokenType(toTokens(await tokenResponse(p, body, secrets, options), startedAt), options.dpop !== undefined, {});
}

/**
 * The gateway's one token request (every grant above, and browser sign-in's OpenID Connect
 * code exchange in browser/oidc-client.ts): POSTs `body` to the token endpoint with this
 * client's authentication, follows no redirect, reads at most 256 KiB, and returns the
 * members that describe the user's token — unread, for a caller that needs more than
 * ProviderTokens (sign-in reads `id_token`) — or throws a ProviderError whose message holds
 * nothing of `secrets` or the client secret.
 */
export async function tokenResponse(p: TokenEndpoint, body: URLSearchParams, secrets: string[], options: ProviderRequestOptions = {}): Promise<Record<string, unknown>> {
  const res = options.dpop ? await postWithProof(p.tokenUrl, options.dpop, (proof) => post(p, p.tokenUrl, body, options, 'token', proof)) : await post(p, p.tokenUrl, body, options, 'token');
  return tokenAnswer(res, [...secrets, p.clientSecret], p.quirks);
}

/** The configured scopes, empty ones dropped, joined (RFC 6749 §3.3: by spaces). */
function joinScopes(p: ProviderEndpoints, separator = ' '): string {
  return p.scopes.filter((s) => s !== '').join(separator);
}

/** The RFC 8707 resource to send, unless this provider refuses the parameter. */
function resourceOf(p: ProviderEndpoints): string | undefined {
  return p.quirks?.resourceIndicator === false ? undefined : p.resource;
}

// ------------------------------------------------------------------ internals ---

/**
 * One form-encoded POST with client authentication: the endpoint's
 * {@link ProviderEndpoints.tokenEndpointAuthMethod} — `client_secret_basic` (RFC 6749
 * §2.3.1: id and secret form-urlencoded, then Basic; the default when a secret is held),
 * `client_secret_post` (both in the body) or `none` (a public client identified by
 * `client_id` in the body, OAuth 2.1 §2.4; also whenever no secret is held). Redirects are not
 * followed: a token endpoint that redirects is misconfigured or hijacked.
 */
async function post(
  p: TokenEndpoint,
  url: string,
  body: URLSearchParams,
  options: ProviderRequestOptions,
  what: 'token' | 'revocation',
  extraHeaders: Record<string, string> = {},
): Promise<ProviderAnswer> {
  const headers: Record<string, string> = {
    ...extraHeaders,
    'content-type': 'application/x-www-form-urlencoded',
    // Asked for explicitly: GitHub answers form-encoded otherwise (provider-response.ts reads both).
    accept: 'application/json',
  };
  const secret = p.clientSecret !== undefined && p.clientSecret !== '' ? p.clientSecret : undefined;
  const method = secret === undefined ? 'none' : (p.tokenEndpointAuthMethod ?? p.quirks?.clientAuthentication ?? 'client_secret_basic');
  if (method === 'client_secret_basic') {
    headers.authorization = `Basic ${Buffer.from(`${formEncode(p.clientId)}:${formEncode(secret!)}`).toString('base64')}`;
  } else {
    body.set('client_id', p.clientId);
    if (method === 'client_secret_post') body.set('client_secret', secret!);
  }
  const where = describeUrl(url);
  const signal = AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const doFetch = options.fetch ?? fetch;
  let res: Response;
  try {
    res = await doFetch(url, { method: 'POST', headers, body: body.toString(), redirect: 'manual', signal });
  } catch (err) {
    throw transportError(err, `${what} endpoint ${where}`);
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => undefined);
    throw new ProviderError('bad_response', `${what} endpoint ${where} answered with a redirect (${res.status}); redirects are not followed`, undefined, res.status);
  }
  let text: string;
  try {
    text = await readBounded(res, MAX_RESPONSE_BYTES);
  } catch (err) {
    if (err instanceof ProviderError) throw err;
    throw transportError(err, `${what} endpoint ${where}`);
  }
  const dpopNonce = res.headers.get('dpop-nonce');
  return { status: res.status, contentType: (res.headers.get('content-type') ?? '').toLowerCase(), text, ...(dpopNonce === null ? {} : { dpopNonce }) };
}

/** `application/x-www-form-urlencoded` encoding of one value (RFC 6749 Appendix B). */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** A fetch failure → 'timeout' (our AbortSignal fired) or 'network', with the cause's code only. */
function transportError(err: unknown, what: string): ProviderError {
  if (err instanceof SafeFetchError) {
    // A guarded fetch (discovered endpoints): its refusals are ours to classify too.
    if (err.reason === 'timeout') return new ProviderError('timeout', `${what} did not answer in time`);
    if (err.reason === 'redirect' || err.reason === 'too_large') return new ProviderError('bad_response', `${what}: ${err.reason === 'redirect' ? 'answered with a redirect' : 'response too large'}`, undefined, err.status);
    return new ProviderError('network', `${what} is unreachable (${err.reason} refused by the SSRF guard)`);
  }
  const name = (err as { name?: string } | undefined)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return new ProviderError('timeout', `${what} did not answer in time`);
  const code = errorCauseCode(err);
  return new ProviderError('network', `${what} is unreachable${code ? ` (${code})` : ''}`);
}

/** Reads at most `max` bytes of the body; more is a bad response. */
async function readBounded(res: Response, max: number): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      throw new ProviderError('bad_response', `response body exceeds ${max} bytes`, undefined, res.status);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Origin and path only: a query string could carry something that is not ours to log. */
function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
