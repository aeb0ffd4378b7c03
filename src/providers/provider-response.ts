/**
 * Reading a provider's answer (SPEC §4 steps 4–5): a token endpoint's success body → the
 * user's tokens, its error body → a ProviderError. Split from provider-client.ts, which
 * sends the requests; this side only reads what came back.
 *
 * Tolerant where real providers differ from RFC 6749 §5.1/§5.2 in ways they document:
 * form-encoded bodies (GitHub without `Accept: application/json`), errors with HTTP 200
 * (GitHub `error=…`, Slack `{"ok": false, "error": …}`), the user's token nested in the
 * body (Slack `authed_user`), provider-specific error codes (ProviderQuirks.errorCodes).
 * Strict about hygiene: nothing we sent (token, code, verifier, client secret) is echoed
 * into a message, and a provider's text is reduced to printable ASCII and truncated.
 */
import type { ProviderQuirks, ProviderTokens } from './provider-client.js';

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

/** A provider's HTTP answer, read in full (bounded) by the client. */
export interface ProviderAnswer {
  status: number;
  /** Lower-cased Content-Type, '' when absent. */
  contentType: string;
  text: string;
  /** The `DPoP-Nonce` header (RFC 9449 §8) as fetch gives it (repeated ones joined), when present. */
  dpopNonce?: string;
}

/** RFC 6749 §5.2: error codes are printable ASCII except `"` and `\`. */
const OAUTH_ERROR_CODE = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,100}$/;

/**
 * A token endpoint's answer → the members that describe the user's token, or a thrown
 * ProviderError. `secrets`: everything we sent that must not reappear in a message.
 */
export function tokenAnswer(res: ProviderAnswer, secrets: Array<string | undefined>, quirks: ProviderQuirks = {}): Record<string, unknown> {
  const parsed = parseBody(res.text, res.contentType);
  // Some providers answer errors with 200: GitHub with an `error` member, Slack with
  // `ok: false` (and an `error` member). Check that first.
  if (res.status !== 200 || (parsed && (typeof parsed.error === 'string' || parsed.ok === false))) {
    throw errorFrom(res.status, parsed, secrets, 'token', quirks.errorCodes);
  }
  if (!parsed) throw new ProviderError('bad_response', `token endpoint answered 200 with an unreadable body (${res.contentType || 'no content type'})`, undefined, 200);
  return userToken(parsed, quirks.userTokenMember);
}

/** A non-200 answer of another endpoint (revocation) → ProviderError. */
export function errorAnswer(res: ProviderAnswer, secrets: Array<string | undefined>, what: string, quirks: ProviderQuirks = {}): ProviderError {
  return errorFrom(res.status, parseBody(res.text, res.contentType), secrets, what, quirks.errorCodes);
}

/** A successful token response → ProviderTokens (RFC 6749 §5.1). */
export function toTokens(json: Record<string, unknown>, startedAt: number): ProviderTokens {
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

/** JSON (RFC 6749 §5.1) or, as GitHub does by default, form-encoded; undefined when neither. */
function parseBody(text: string, contentType: string): Record<string, unknown> | undefined {
  if (contentType.includes('application/x-www-form-urlencoded')) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  try {
    const value: unknown = JSON.parse(text);
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The part of a token response that describes the user's token: the nested member when
 * the provider nests it there (Slack's `authed_user`), else the response itself. A bot or
 * app token beside it at the top level is never taken for the user's.
 */
function userToken(parsed: Record<string, unknown>, member: string | undefined): Record<string, unknown> {
  const nested = member === undefined ? undefined : parsed[member];
  return isRecord(nested) && typeof nested.access_token === 'string' ? nested : parsed;
}

/**
 * An error answer → ProviderError, with nothing we sent echoed back into the message. A
 * provider's own code that means a standard one (`aliases`) is reported as the standard
 * code, with the provider's in brackets.
 */
function errorFrom(
  status: number,
  parsed: Record<string, unknown> | undefined,
  secrets: Array<string | undefined>,
  what: string,
  aliases: Readonly<Record<string, string>> = {},
): ProviderError {
  const code = parsed?.error;
  if (typeof code === 'string' && code !== '') {
    const own = OAUTH_ERROR_CODE.test(code) ? code : 'invalid_error_code';
    const oauthError = Object.hasOwn(aliases, own) ? aliases[own]! : own;
    const description = typeof parsed?.error_description === 'string' ? sanitize(parsed.error_description, secrets) : '';
    const named = oauthError === own ? oauthError : `${oauthError} [${own}]`;
    return new ProviderError('oauth', `${what} request refused: ${named}${description ? ` (${description})` : ''}`, oauthError, status);
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

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
