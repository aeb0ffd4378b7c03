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
 */
import { createHash, randomBytes } from 'node:crypto';
import { SafeFetchError } from './safe-fetch.js';

export interface ProviderTokens {
  accessToken: string;
  refreshToken?: string;
  /** Epoch milliseconds; absent when the provider did not say (`expires_in` omitted). */
  expiresAt?: number;
  scope?: string;
  tokenType: string;
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
}

export type ProviderErrorKind = 'oauth' | 'network' | 'timeout' | 'bad_response';

/**
 * A failed provider request. `oauth`: the provider answered with an RFC 6749 §5.2 error
 * (`oauthError`, e.g. `invalid_grant`); `network`: no answer (refused, reset, DNS);
 * `timeout`: no complete answer in time; `bad_response`: an answer that is not a usable
 * token response (unexpected status, redirect, unparseable or oversized body).
 */
export class ProviderError extends Error {
  constructor(
    readonly kind: ProviderErrorKind,
    message: string,
    readonly oauthError?: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
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
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** Token responses are small; an id_token makes them a few KiB at most. */
const MAX_RESPONSE_BYTES = 256 * 1024;
/** RFC 6749 §5.2: error codes are printable ASCII except `"` and `\`. */
const OAUTH_ERROR_CODE = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,100}$/;

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
 * their own, e.g. `prompt=consent`); ours replace same-named ones.
 */
export function authorizationRequestUrl(
  p: ProviderEndpoints,
  o: { redirectUri: string; state: string; codeChallenge: string },
): string {
  const url = new URL(p.authorizationUrl);
  const q = url.searchParams;
  q.set('response_type', 'code');
  q.set('client_id', p.clientId);
  q.set('redirect_uri', o.redirectUri);
  const scope = p.scopes.filter((s) => s !== '').join(' ');
  if (scope) q.set('scope', scope);
  else q.delete('scope');
  q.set('state', o.state);
  q.set('code_challenge', o.codeChallenge);
  q.set('code_challenge_method', 'S256');
  if (p.resource) q.set('resource', p.resource);
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
  if (p.resource) body.set('resource', p.resource);
  const startedAt = Date.now();
  const json = await tokenRequest(p, body, [o.code, o.codeVerifier], options);
  const tokens = toTokens(json, startedAt);
  const requested = p.scopes.filter((s) => s !== '').join(' ');
  if (tokens.scope === undefined && requested) tokens.scope = requested;
  return tokens;
}

/**
 * Refreshes (OAuth 2.1 §4.3). No `scope` parameter is sent, which asks for the scope
 * originally granted. A provider that does not rotate refresh tokens omits
 * `refresh_token` from the response: the old one is kept. `scope` is returned only when
 * the response has it (the caller knows the previously granted scope).
 */
export async function refreshTokens(p: ProviderEndpoints, refreshToken: string, options: ProviderRequestOptions = {}): Promise<ProviderTokens> {
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken });
  if (p.resource) body.set('resource', p.resource);
  const startedAt = Date.now();
  const json = await tokenRequest(p, body, [refreshToken], options);
  const tokens = toTokens(json, startedAt);
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
  const parsed = parseBody(res.text, res.contentType);
  throw errorFrom(res.status, parsed, [token, p.clientSecret], 'revocation');
}

// ------------------------------------------------------------------ internals ---

interface RawResponse {
  status: number;
  contentType: string;
  text: string;
}

/** POSTs to the token endpoint and returns the parsed success body, or throws. */
async function tokenRequest(p: ProviderEndpoints, body: URLSearchParams, secrets: string[], options: ProviderRequestOptions): Promise<Record<string, unknown>> {
  const res = await post(p, p.tokenUrl, body, options, 'token');
  const parsed = parseBody(res.text, res.contentType);
  // Some providers (GitHub) answer errors with 200 and an `error` member: check it first.
  if (res.status !== 200 || (parsed && typeof parsed.error === 'string')) {
    throw errorFrom(res.status, parsed, [...secrets, p.clientSecret], 'token');
  }
  if (!parsed) throw new ProviderError('bad_response', `token endpoint answered 200 with an unreadable body (${res.contentType || 'no content type'})`, undefined, 200);
  return parsed;
}

/**
 * One form-encoded POST with client authentication: `client_secret_basic` when a secret
 * is configured (RFC 6749 §2.3.1: id and secret form-urlencoded, then Basic), else a
 * public client identified by `client_id` in the body (OAuth 2.1 §2.4). Redirects are not
 * followed: a token endpoint that redirects is misconfigured or hijacked.
 */
async function post(
  p: ProviderEndpoints,
  url: string,
  body: URLSearchParams,
  options: ProviderRequestOptions,
  what: 'token' | 'revocation',
): Promise<RawResponse> {
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  if (p.clientSecret !== undefined && p.clientSecret !== '') {
    headers.authorization = `Basic ${Buffer.from(`${formEncode(p.clientId)}:${formEncode(p.clientSecret)}`).toString('base64')}`;
  } else {
    body.set('client_id', p.clientId);
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
  return { status: res.status, contentType: (res.headers.get('content-type') ?? '').toLowerCase(), text };
}

/** `application/x-www-form-urlencoded` encoding of one value (RFC 6749 Appendix B). */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

/** JSON (RFC 6749 §5.1) or, as GitHub does by default, form-encoded; undefined when neither. */
function parseBody(text: string, contentType: string): Record<string, unknown> | undefined {
  if (contentType.includes('application/x-www-form-urlencoded')) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A successful token response → ProviderTokens (RFC 6749 §5.1). */
function toTokens(json: Record<string, unknown>, startedAt: number): ProviderTokens {
  const accessToken = json.access_token;
  if (typeof accessToken !== 'string' || accessToken === '') {
    throw new ProviderError('bad_response', 'token response has no access_token', undefined, 200);
  }
  // token_type is REQUIRED (§5.1); a provider that leaves it out means Bearer in practice.
  const tokenType = typeof json.token_type === 'string' && json.token_type !== '' ? json.token_type : 'Bearer';
  const tokens: ProviderTokens = { accessToken, tokenType };
  if (typeof json.refresh_token === 'string' && json.refresh_token !== '') tokens.refreshToken = json.refresh_token;
  if (typeof json.scope === 'string') tokens.scope = json.scope;
  const expiresIn = typeof json.expires_in === 'number' ? json.expires_in : typeof json.expires_in === 'string' && json.expires_in.trim() !== '' ? Number(json.expires_in) : NaN;
  // Counted from when the request was sent, so the token never outlives our idea of it.
  if (Number.isFinite(expiresIn) && expiresIn >= 0) tokens.expiresAt = startedAt + Math.floor(expiresIn * 1000);
  return tokens;
}

/** An error answer → ProviderError, with nothing we sent echoed back into the message. */
function errorFrom(status: number, parsed: Record<string, unknown> | undefined, secrets: Array<string | undefined>, what: string): ProviderError {
  const code = parsed?.error;
  if (typeof code === 'string' && code !== '') {
    const oauthError = OAUTH_ERROR_CODE.test(code) ? code : 'invalid_error_code';
    const description = typeof parsed?.error_description === 'string' ? sanitize(parsed.error_description, secrets) : '';
    return new ProviderError('oauth', `${what} request refused: ${oauthError}${description ? ` (${description})` : ''}`, oauthError, status);
  }
  return new ProviderError('bad_response', `${what} endpoint answered HTTP ${status} without an OAuth error`, undefined, status);
}

/** Printable ASCII only, secrets removed, at most 200 characters. */
function sanitize(text: string, secrets: Array<string | undefined>): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join('[redacted]');
  out = out.replace(/[^\x20-\x7E]/g, ' ');
  return out.length > 200 ? `${out.slice(0, 200)}…` : out;
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
  const code = causeCode(err);
  return new ProviderError('network', `${what} is unreachable${code ? ` (${code})` : ''}`);
}

function causeCode(err: unknown): string | undefined {
  let e = err as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string' && /^[A-Z0-9_]{2,40}$/.test(e.code)) return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
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
