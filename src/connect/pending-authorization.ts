/**
 * An authorization request in flight (SPEC §4 steps 3–4): what "Continue" on /connect or
 * "Connect" on /connections sent the browser to the provider with, kept under the random
 * `state` until the provider redirects back. The callback accepts an answer only when it
 * fits this record, and only then takes it (single use).
 *
 * Mix-up defence (RFC 9700 §4.4.2; issue 12, defect 2): each provider has its own redirect
 * URI, `<publicUrl>/oauth/callback/{provider}`, so an answer that a malicious authorization
 * server bounced through an honest one arrives at the honest provider's path and does not
 * fit the record; where the issuer is known, RFC 9207's `iss` must name it, and must be
 * present when the server's metadata advertises `authorization_response_iss_parameter_supported`.
 * The path without a provider, `/oauth/callback`, stays for providers registered there
 * before per-provider URIs, and only for those configured without `discover` (their
 * authorization server is the operator's choice, not a backend's).
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import type { BrowserUser } from '../browser/browser-sessions.js';
import { authorizationRequestUrl, createPkce } from '../providers/provider-client.js';
import type { ResolvedProvider } from '../providers/provider-endpoints.js';
import { callbackUri, legacyCallbackUri } from '../providers/redirect-uri.js';
import { ValueKeys } from '../state/value-keys.js';

export interface PendingAuthorization {
  provider: string;
  /** The backend whose `upstreamAuth` named the endpoints. */
  backend: string;
  /** The elicitation being answered; absent when started with Connect on /connections. */
  elicitationId?: string;
  browserSessionId: string;
  userKey: string;
  codeVerifier: string;
  /** The `redirect_uri` of the request: the code exchange must repeat it (RFC 6749 §4.1.3). */
  redirectUri: string;
  /** The scopes the request asked for: what the token was granted when the token response does not say (RFC 6749 §5.1). */
  scopes?: string[];
  /** RFC 9207: the issuer identifier of the authorization server, when known. */
  issuer?: string;
  /** RFC 9207 §3: the server advertises `iss` in its responses, so one without is refused. */
  requireIss?: boolean;
}

/** Why a callback does not fit its pending authorization. Each leaves the record in place. */
export type CallbackMismatch = 'another-browser' | 'wrong-redirect-uri' | 'issuer-missing' | 'issuer-mismatch';

const STATE_TTL_MS = 10 * 60_000;
const stateKey = ValueKeys.oauthState;

/**
 * Stores a pending authorization under a fresh `state` and returns the provider URL to send
 * the browser to: PKCE S256 (RFC 7636), `state` bound to this browser session and user.
 */
export async function beginAuthorization(
  store: StateStore,
  o: { publicUrl: string; endpoints: ResolvedProvider; user: BrowserUser; provider: string; backend: string; elicitationId?: string },
): Promise<string> {
  const pkce = createPkce();
  const state = randomBytes(32).toString('base64url');
  const redirectUri = callbackUri(o.publicUrl, o.provider);
  const pending: PendingAuthorization = {
    provider: o.provider,
    backend: o.backend,
    ...(o.elicitationId ? { elicitationId: o.elicitationId } : {}),
    browserSessionId: o.user.sessionId,
    userKey: o.user.userKey,
    codeVerifier: pkce.verifier,
    redirectUri,
    scopes: o.endpoints.scopes,
    ...(o.endpoints.issuer ? { issuer: o.endpoints.issuer } : {}),
    ...(o.endpoints.requireIssParameter ? { requireIss: true } : {}),
  };
  await store.putValue(stateKey(state), JSON.stringify(pending), STATE_TTL_MS);
  return authorizationRequestUrl(o.endpoints, { redirectUri, state, codeChallenge: pkce.challenge });
}

/** The stored text for `state` (read, not taken: a refused callback must leave it usable). */
export async function readPending(store: StateStore, state: string | undefined): Promise<string | undefined> {
  if (!state || state.length > 128) return undefined;
  return store.getValue(stateKey(state));
}

/**
 * Takes the record, only if it is still the one that was checked: of two callbacks racing
 * with the same `state`, one wins (RFC 9700 §2.1.2, single use).
 */
export async function takePending(store: StateStore, state: string, text: string): Promise<boolean> {
  return store.deleteValueIf(stateKey(state), text);
}

/**
 * The record in `text`. Records written before per-provider redirect URIs (a rolling
 * upgrade, at most {@link STATE_TTL_MS} old) name only their elicitation: `fromElicitation`
 * supplies its provider and backend, and their redirect URI was the legacy one.
 */
export async function parsePending(
  text: string,
  publicUrl: string,
  fromElicitation: (id: string) => Promise<{ provider: string; backend: string } | undefined>,
): Promise<PendingAuthorization | undefined> {
  const record = JSON.parse(text) as Partial<PendingAuthorization>;
  if (typeof record.browserSessionId !== 'string' || typeof record.userKey !== 'string' || typeof record.codeVerifier !== 'string') return undefined;
  if (typeof record.provider === 'string' && typeof record.backend === 'string' && typeof record.redirectUri === 'string') return record as PendingAuthorization;
  const origin = typeof record.elicitationId === 'string' ? await fromElicitation(record.elicitationId) : undefined;
  return origin && { ...(record as PendingAuthorization), ...origin, redirectUri: legacyCallbackUri(publicUrl) };
}

/**
 * Whether the answer arriving at `/oauth/callback/{pathProvider}` (or the legacy path when
 * `pathProvider` is undefined) fits `pending`, checked before anything is taken or changed.
 * The signed-in browser comes first: a leaked callback URL opened elsewhere learns nothing
 * more than that it was refused.
 */
export function callbackMismatch(
  pending: PendingAuthorization,
  o: { config: Config; pathProvider: string | undefined; user: BrowserUser | undefined; iss: string | undefined },
): CallbackMismatch | undefined {
  if (!o.user || o.user.sessionId !== pending.browserSessionId || o.user.userKey !== pending.userKey) return 'another-browser';
  if (o.pathProvider !== undefined ? o.pathProvider !== pending.provider : !legacyPathAllowed(o.config, pending)) return 'wrong-redirect-uri';
  // RFC 9207 §2.4: compared by simple string comparison with the issuer the request went to.
  if (o.iss !== undefined && pending.issuer !== undefined && o.iss !== pending.issuer) return 'issuer-mismatch';
  if (o.iss === undefined && pending.requireIss) return 'issuer-missing';
  return undefined;
}

/** The legacy path serves only backends whose provider endpoints are configured, not discovered. */
function legacyPathAllowed(config: Config, pending: PendingAuthorization): boolean {
  const upstream = config.backends.find((b) => b.name === pending.backend)?.upstreamAuth;
  return upstream !== undefined && upstream.provider === pending.provider && !upstream.discover;
}
