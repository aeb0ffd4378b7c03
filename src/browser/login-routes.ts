/**
 * Browser sign-in with the MCP authorization server (SPEC §2 `/login`, `/login/callback`,
 * `/logout`; §4 step 3): OpenID Connect authorization code flow with PKCE S256, as a
 * confidential or public client (`auth.login`). The result is a browser session whose
 * `iss`+`sub` are those the same issuer puts into MCP access tokens, so the connect page can
 * compare the person in the browser with the user who triggered an elicitation.
 *
 * Defences, in the order a callback meets them:
 * - `state` is random and lives 10 minutes; `/login` stores nothing server-side (issue 13):
 *   the pending sign-in — state, returnTo, start time — is listed in a short-lived, signed,
 *   HttpOnly pre-login cookie (`__Host-sb_login`, Path=/, with an https publicUrl; else
 *   `sb_login`, Path=/login), and the PKCE verifier and nonce are derived from the state with a
 *   secret key (pending-login.ts);
 * - a state is single use: once its code is redeemed it is remembered in the store;
 * - a state the browser's own cookie does not list was started in another browser (login
 *   CSRF) and is refused without using it up; a request with two pre-login cookies (one
 *   planted by a sibling host) is refused the same way;
 * - the code is redeemed and the id_token verified against the issuer's JWKS (signature,
 *   algorithm allowlist, `iss`, `aud` = client id, `azp`, `exp`, `nonce`) by oidc-client.ts;
 * - `returnTo` is a same-origin path of at most 512 characters, or `/connections` — never an
 *   open redirect (checked when stored and again before the redirect).
 * Errors end on an HTML error page (never a stack); codes, tokens and query values are not logged.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { JWTPayload } from 'jose';
import type { Config } from '../config/schema.js';
import { pickClaims, policyClaimNames } from '../policy/policy-claims.js';
import type { Signer } from '../state/secrets.js';
import type { StateStore } from '../state/store.js';
import { createOidcClient, SignInError, type OidcClient, type ProviderMetadata, type SignInClaims } from './oidc-client.js';
import { createPendingLogins, LOGIN_RETURN_TO_MAX, PENDING_LOGIN_TTL_MS, STATE_FORMAT, type PendingLogin, type PendingLogins } from './pending-login.js';
import {
  type BrowserSessions,
  type CookiePolicy,
  cookiePolicy,
  cookieSigner,
  loginUrl,
  onlySignedCookie,
  registerFormParser,
  safeReturnTo,
  serializeCookie,
} from './browser-sessions.js';
import { CSRF_FIELD, errorPage, refusalPage, sendPage, setPageErrorHandler, signedOutPage, type Page } from './pages.js';
import { ValueKeys } from '../state/value-keys.js';

const RETURN_DEFAULT = '/connections';

type LoginConfig = NonNullable<Config['auth']['login']>;

interface LoginDeps {
  config: Config;
  store: StateStore;
  sessions: BrowserSessions;
}

/** What the sign-in handlers share, built once per app. */
interface SignIn extends LoginDeps {
  /** Present exactly when `auth.login` is configured. */
  client: { login: LoginConfig; oidc: OidcClient } | undefined;
  pendingLogins: PendingLogins;
  cookies: CookiePolicy;
  signer: Signer;
  /** What access policies read of the user, kept with the browser session (broker mode's grants). */
  policyClaims: ReturnType<typeof policyClaimNames>;
  redirectUri: string;
}

export function registerLoginRoutes(app: FastifyInstance, deps: LoginDeps): void {
  const { config } = deps;
  const login = config.auth.login;
  const signIn: SignIn = {
    ...deps,
    client: login ? { login, oidc: createOidcClient(config, login) } : undefined,
    pendingLogins: createPendingLogins(config.secrets.cookieKey!),
    cookies: cookiePolicy(config),
    signer: cookieSigner(config),
    policyClaims: policyClaimNames(config),
    redirectUri: `${config.publicUrl}/login/callback`,
  };
  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);
    scope.get('/login', (request, reply) => startSignIn(signIn, request, reply));
    scope.get('/login/callback', (request, reply) => finishSignIn(signIn, request, reply));
    scope.get('/login/signed-out', async (_request, reply) => sendPage(reply, signedOutPage()));
    scope.post('/logout', (request, reply) => signOut(deps.sessions, request, reply));
  });
}

/**
 * `GET /login`: the authorization request (code, PKCE S256, nonce, state), with the new
 * sign-in added to this browser's pre-login cookie (two tabs must not evict each other).
 */
async function startSignIn(signIn: SignIn, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!signIn.client) return sendPage(reply, notConfigured());
  const { login, oidc } = signIn.client;
  const query = request.query as Record<string, unknown>;
  const returnTo = loginReturnTo(first(query.returnTo));
  let metadata: ProviderMetadata;
  try {
    metadata = await oidc.metadata();
  } catch (err) {
    request.log.warn({ reason: (err as Error).message }, 'sign-in: issuer discovery failed');
    return sendPage(reply, unavailable(returnTo));
  }

  const { pendingLogins, cookies } = signIn;
  const state = randomBytes(32).toString('base64url');
  const pending = [...(heldPending(signIn, request) ?? []), { state, returnTo, createdAt: Date.now() }];
  const target = new URL(metadata.authorizationEndpoint);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: login.clientId,
    redirect_uri: signIn.redirectUri,
    scope: [...new Set(['openid', ...login.scopes])].join(' '),
    state,
    nonce: pendingLogins.nonce(state),
    code_challenge: createHash('sha256').update(pendingLogins.verifier(state)).digest('base64url'),
    code_challenge_method: 'S256',
  };
  const hint = first(query.login_hint);
  if (typeof hint === 'string' && /^[\x21-\x7e]{1,256}$/.test(hint)) params.login_hint = hint;
  const prompt = first(query.prompt);
  if (prompt === 'login' || prompt === 'select_account') params.prompt = prompt;
  for (const [k, v] of Object.entries(params)) target.searchParams.set(k, v);

  const cookie = serializeCookie(cookies.login, signIn.signer.sign(pendingLogins.write(pending)), { maxAgeMs: PENDING_LOGIN_TTL_MS, path: cookies.loginPath, secure: cookies.secure });
  reply.header('set-cookie', cookie);
  return redirect(reply, target.href);
}

/**
 * `GET /login/callback`: the checks in the order of the module comment, then the code
 * exchange, the single-use mark and the browser session.
 */
async function finishSignIn(signIn: SignIn, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (!signIn.client) return sendPage(reply, notConfigured());
  const query = request.query as Record<string, unknown>;
  const held = await heldState(signIn, request, first(query.state));
  if ('page' in held) return sendPage(reply, held.page);
  const { state, pending } = held;
  // Checked again: a cookie written by an older version may hold an unsafe target.
  const returnTo = loginReturnTo(pending.returnTo);
  const retryUrl = loginUrl(returnTo);
  const refused = answerRefusal(request, first(query.error), retryUrl);
  if (refused) return sendPage(reply, refused);
  const code = first(query.code);
  if (typeof code !== 'string' || code.length === 0 || code.length > 2048) {
    return sendPage(reply, errorPage({ status: 400, title: 'Sign-in link is incomplete', detail: 'The sign-in response carried no authorization code.', retryUrl }));
  }

  const { pendingLogins } = signIn;
  let claims: SignInClaims;
  try {
    claims = await signIn.client.oidc.redeem({ code, verifier: pendingLogins.verifier(state), nonce: pendingLogins.nonce(state), redirectUri: signIn.redirectUri });
  } catch (err) {
    return sendPage(reply, exchangeFailedPage(request, err, retryUrl));
  }

  // Single use from here on, even if a concurrent request raced us to it.
  if (!(await signIn.store.putValueIfAbsent(ValueKeys.usedLoginState(state), '1', PENDING_LOGIN_TTL_MS))) return sendPage(reply, expiredPage());
  const user = await signIn.sessions.start(reply, { iss: claims.iss, sub: claims.sub, label: labelOf(claims), claims: pickClaims(claims, signIn.policyClaims) }, request);
  request.log.info({ userKey: user.userKey }, 'sign-in: browser session started');
  return redirect(reply, returnTo);
}

/**
 * The callback's `state` and the pending sign-in this browser holds for it, or the page that
 * ends the callback: a malformed state, one unknown or already used, or one started in another
 * browser (login CSRF) — that last one is not used up, so the browser that started it can
 * still finish.
 */
async function heldState(signIn: SignIn, request: FastifyRequest, state: unknown): Promise<{ state: string; pending: PendingLogin } | { page: Page }> {
  if (typeof state !== 'string' || !/^[A-Za-z0-9_-]{1,128}$/.test(state)) {
    return { page: errorPage({ status: 400, title: 'Sign-in link is incomplete', detail: 'The sign-in response did not carry a valid state. Please sign in again.', retryUrl: '/login' }) };
  }
  if (!STATE_FORMAT.test(state) || (await signIn.store.getValue(ValueKeys.usedLoginState(state))) !== undefined) {
    request.log.info('sign-in: unknown or used state');
    return { page: expiredPage() };
  }
  const pending = heldPending(signIn, request)?.find((p) => p.state === state);
  if (!pending) {
    request.log.warn('sign-in: state not started in this browser');
    return {
      page: refusalPage({ title: 'Sign-in refused', reason: 'This sign-in was started in a different browser (or its cookies were cleared). Start the sign-in again in this browser.' }),
    };
  }
  return { state, pending };
}

/** The page for an `error` the authorization server sent back instead of a code; undefined when there is none. */
function answerRefusal(request: FastifyRequest, error: unknown, retryUrl: string): Page | undefined {
  if (typeof error !== 'string') return undefined;
  const known = /^[a-z_]{1,64}$/.test(error);
  request.log.info({ error: known ? error : 'other' }, 'sign-in: authorization server returned an error');
  if (error === 'access_denied') {
    return errorPage({ status: 403, title: 'Sign-in cancelled', detail: 'Sign-in was cancelled or refused, so you are not signed in.', retryUrl });
  }
  return errorPage({ status: 400, title: 'Sign-in failed', detail: `The sign-in service reported an error${known ? ` (${error})` : ''}.`, retryUrl });
}

/** A failed code exchange or id_token check: logged by stage, a 502 page without detail. */
function exchangeFailedPage(request: FastifyRequest, err: unknown, retryUrl: string): Page {
  const failure = err instanceof SignInError ? err : new SignInError('exchange', 'unexpected failure');
  request.log.warn({ stage: failure.stage, reason: failure.message }, 'sign-in: code exchange failed');
  return errorPage({
    status: 502,
    title: 'Sign-in failed',
    detail:
      failure.stage === 'id_token' ? 'The sign-in service answered with an identity that could not be verified.' : 'The sign-in service did not complete the sign-in. Please try again.',
    retryUrl,
  });
}

/** `POST /logout`: a signed-in browser must send its CSRF token; then the session ends. */
async function signOut(sessions: BrowserSessions, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const user = await sessions.current(request);
  if (user) {
    const body = request.body as Record<string, string> | undefined;
    if (!sessions.csrfValid(user, body?.[CSRF_FIELD])) {
      request.log.warn('sign-out: missing or wrong CSRF token');
      return sendPage(reply, refusalPage({ title: 'Sign-out refused', reason: 'The sign-out form was not sent by this site (its security token is missing or wrong).' }));
    }
  }
  await sessions.end(request, reply);
  return redirect(reply, '/login/signed-out');
}

/** The sign-ins this browser has under way, when it holds exactly one pre-login cookie that verifies. */
function heldPending(signIn: SignIn, request: FastifyRequest): PendingLogin[] | undefined {
  const value = onlySignedCookie(request, signIn.cookies.login, signIn.signer);
  return value === undefined ? undefined : signIn.pendingLogins.read(value);
}

function notConfigured(): Page {
  return errorPage({
    status: 503,
    title: 'Sign-in is not configured',
    detail: 'This Switchboard has no sign-in client (auth.login), so browser sign-in is unavailable. Ask its operator to configure it.',
  });
}

function unavailable(returnTo: string): Page {
  return errorPage({ status: 503, title: 'Sign-in unavailable', detail: 'The sign-in service cannot be reached right now. Please try again in a moment.', retryUrl: loginUrl(returnTo) });
}

function expiredPage(): Page {
  return errorPage({ status: 400, title: 'Sign-in expired', detail: 'This sign-in attempt has expired or was already used. Please sign in again.', retryUrl: '/login' });
}

function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(303).headers({ location, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' }).send();
}

/** A same-origin path short enough to travel in the pre-login cookie, else the default. */
function loginReturnTo(raw: unknown): string {
  const returnTo = safeReturnTo(raw, RETURN_DEFAULT);
  return returnTo.length <= LOGIN_RETURN_TO_MAX ? returnTo : RETURN_DEFAULT;
}

function first(value: unknown): unknown {
  return Array.isArray(value) ? value[0] : value;
}

/** A short display name from the id_token, else undefined (the session then shows `sub`). */
function labelOf(claims: JWTPayload): string | undefined {
  for (const k of ['name', 'preferred_username', 'email']) {
    const v = claims[k];
    if (typeof v === 'string' && v.trim()) return v.trim().slice(0, 200);
  }
  return undefined;
}
