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
 * - the id_token is verified against the issuer's JWKS (signature, algorithm allowlist, `iss`,
 *   `aud` = client id, `azp`, `exp`, `nonce`);
 * - `returnTo` is a same-origin path of at most 512 characters, or `/connections` — never an
 *   open redirect (checked when stored and again before the redirect).
 * Errors end on an HTML error page (never a stack); codes, tokens and query values are not logged.
 */
import { discoverIssuerMetadata } from '../auth/discovery.js';
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Config } from '../config/schema.js';
import { pickClaims, policyClaimNames } from '../policy/policy-claims.js';
import type { StateStore } from '../state/store.js';
import { createPendingLogins, LOGIN_RETURN_TO_MAX, PENDING_LOGIN_TTL_MS, STATE_FORMAT, type PendingLogin } from './pending-login.js';
import {
  type BrowserSessions,
  cookiePolicy,
  cookieSigner,
  loginUrl,
  onlySignedCookie,
  registerFormParser,
  safeReturnTo,
  serializeCookie,
} from './browser-sessions.js';
import { CSRF_FIELD, errorPage, refusalPage, sendPage, setPageErrorHandler, signedOutPage } from './pages.js';

/** A redeemed state, remembered until it would have expired anyway. */
const USED_PREFIX = 'login-used:';
const HTTP_TIMEOUT_MS = 10_000;
const RETURN_DEFAULT = '/connections';

type LoginConfig = NonNullable<Config['auth']['login']>;

interface ProviderMetadata {
  issuer: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  jwksUri: string;
  authMethods?: string[];
}

export function registerLoginRoutes(app: FastifyInstance, deps: { config: Config; store: StateStore; sessions: BrowserSessions }): void {
  const { config, store, sessions } = deps;
  const login = config.auth.login;
  const signer = cookieSigner(config);
  const cookies = cookiePolicy(config);
  const pendingLogins = createPendingLogins(config.secrets.cookieKey!);
  /** The sign-ins this browser has under way, when it holds exactly one pre-login cookie that verifies. */
  const heldPending = (request: FastifyRequest): PendingLogin[] | undefined => {
    const value = onlySignedCookie(request, cookies.login, signer);
    return value === undefined ? undefined : pendingLogins.read(value);
  };
  const oidc = login ? createOidcClient(config, login) : undefined;
  // What access policies read of the user, kept with the browser session (broker mode's grants).
  const policyClaims = policyClaimNames(config);
  const redirectUri = `${config.publicUrl}/login/callback`;

  const notConfigured = () =>
    errorPage({
      status: 503,
      title: 'Sign-in is not configured',
      detail: 'This Switchboard has no sign-in client (auth.login), so browser sign-in is unavailable. Ask its operator to configure it.',
    });

  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get('/login', async (request, reply) => {
      if (!login || !oidc) return sendPage(reply, notConfigured());
      const query = request.query as Record<string, unknown>;
      const returnTo = loginReturnTo(first(query.returnTo));
      let metadata: ProviderMetadata;
      try {
        metadata = await oidc.metadata();
      } catch (err) {
        request.log.warn({ reason: (err as Error).message }, 'sign-in: issuer discovery failed');
        return sendPage(reply, unavailable(returnTo));
      }

      // Added to the sign-ins this browser has under way (two tabs must not evict each other).
      const state = randomBytes(32).toString('base64url');
      const pending = [...(heldPending(request) ?? []), { state, returnTo, createdAt: Date.now() }];

      const target = new URL(metadata.authorizationEndpoint);
      const params: Record<string, string> = {
        response_type: 'code',
        client_id: login.clientId,
        redirect_uri: redirectUri,
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

      reply.header('set-cookie', serializeCookie(cookies.login, signer.sign(pendingLogins.write(pending)), { maxAgeMs: PENDING_LOGIN_TTL_MS, path: cookies.loginPath, secure: cookies.secure }));
      return redirect(reply, target.href);
    });

    scope.get('/login/callback', async (request, reply) => {
      if (!login || !oidc) return sendPage(reply, notConfigured());
      const query = request.query as Record<string, unknown>;
      const state = first(query.state);
      if (typeof state !== 'string' || !/^[A-Za-z0-9_-]{1,128}$/.test(state)) {
        return sendPage(reply, errorPage({ status: 400, title: 'Sign-in link is incomplete', detail: 'The sign-in response did not carry a valid state. Please sign in again.', retryUrl: '/login' }));
      }
      const expired = () =>
        sendPage(reply, errorPage({ status: 400, title: 'Sign-in expired', detail: 'This sign-in attempt has expired or was already used. Please sign in again.', retryUrl: '/login' }));
      if (!STATE_FORMAT.test(state) || (await store.getValue(USED_PREFIX + state)) !== undefined) {
        request.log.info('sign-in: unknown or used state');
        return expired();
      }
      const held = heldPending(request);
      const pending = held?.find((p) => p.state === state);
      if (!pending) {
        // Not used up: the browser that started this sign-in can still finish it.
        request.log.warn('sign-in: state not started in this browser');
        return sendPage(
          reply,
          refusalPage({ title: 'Sign-in refused', reason: 'This sign-in was started in a different browser (or its cookies were cleared). Start the sign-in again in this browser.' }),
        );
      }
      // Checked again: a cookie written by an older version may hold an unsafe target.
      const returnTo = loginReturnTo(pending.returnTo);
      const retryUrl = loginUrl(returnTo);

      const error = first(query.error);
      if (typeof error === 'string') {
        request.log.info({ error: /^[a-z_]{1,64}$/.test(error) ? error : 'other' }, 'sign-in: authorization server returned an error');
        if (error === 'access_denied') {
          return sendPage(reply, errorPage({ status: 403, title: 'Sign-in cancelled', detail: 'Sign-in was cancelled or refused, so you are not signed in.', retryUrl }));
        }
        const code = /^[a-z_]{1,64}$/.test(error) ? ` (${error})` : '';
        return sendPage(reply, errorPage({ status: 400, title: 'Sign-in failed', detail: `The sign-in service reported an error${code}.`, retryUrl }));
      }
      const code = first(query.code);
      if (typeof code !== 'string' || code.length === 0 || code.length > 2048) {
        return sendPage(reply, errorPage({ status: 400, title: 'Sign-in link is incomplete', detail: 'The sign-in response carried no authorization code.', retryUrl }));
      }

      let claims: JWTPayload & { iss: string; sub: string };
      try {
        claims = await oidc.redeem({ code, verifier: pendingLogins.verifier(state), nonce: pendingLogins.nonce(state), redirectUri });
      } catch (err) {
        const failure = err instanceof SignInError ? err : new SignInError('exchange', 'unexpected failure');
        request.log.warn({ stage: failure.stage, reason: failure.message }, 'sign-in: code exchange failed');
        return sendPage(
          reply,
          errorPage({
            status: 502,
            title: 'Sign-in failed',
            detail:
              failure.stage === 'id_token'
                ? 'The sign-in service answered with an identity that could not be verified.'
                : 'The sign-in service did not complete the sign-in. Please try again.',
            retryUrl,
          }),
        );
      }

      // Single use from here on, even if a concurrent request raced us to it.
      if (!(await store.putValueIfAbsent(USED_PREFIX + state, '1', PENDING_LOGIN_TTL_MS))) return expired();
      const user = await sessions.start(reply, { iss: claims.iss, sub: claims.sub, label: labelOf(claims), claims: pickClaims(claims, policyClaims) }, request);
      request.log.info({ userKey: user.userKey }, 'sign-in: browser session started');
      return redirect(reply, returnTo);
    });

    scope.get('/login/signed-out', async (_request, reply) => sendPage(reply, signedOutPage()));

    scope.post('/logout', async (request, reply) => {
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
    });
  });

  function unavailable(returnTo: string) {
    return errorPage({ status: 503, title: 'Sign-in unavailable', detail: 'The sign-in service cannot be reached right now. Please try again in a moment.', retryUrl: loginUrl(returnTo) });
  }
}

/** A failure while redeeming the code; `stage` says which step (for logs and the page). */
class SignInError extends Error {
  constructor(
    readonly stage: 'discovery' | 'exchange' | 'id_token',
    message: string,
  ) {
    super(message);
  }
}

interface OidcClient {
  metadata(): Promise<ProviderMetadata>;
  /** Exchanges the code and returns the verified id_token claims. */
  redeem(o: { code: string; verifier: string; nonce: string; redirectUri: string }): Promise<JWTPayload & { iss: string; sub: string }>;
}

function createOidcClient(config: Config, login: LoginConfig): OidcClient {
  let metadata: Promise<ProviderMetadata> | undefined;
  let keys: { uri: string; set: JWTVerifyGetKey } | undefined;

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
      const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier });
      const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
      if (login.clientSecret !== undefined) {
        const methods = m.authMethods;
        if (methods && !methods.includes('client_secret_basic') && methods.includes('client_secret_post')) {
          form.set('client_id', login.clientId);
          form.set('client_secret', login.clientSecret);
        } else {
          // RFC 6749 §2.3.1: both parts form-urlencoded before base64.
          const basic = `${encodeURIComponent(login.clientId)}:${encodeURIComponent(login.clientSecret)}`;
          headers.authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
        }
      } else {
        form.set('client_id', login.clientId);
      }

      let body: Record<string, unknown>;
      try {
        const res = await fetch(m.tokenEndpoint, { method: 'POST', headers, body: form, redirect: 'error', signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
        const text = await res.text();
        const parsed = safeJson(text);
        if (!res.ok) {
          const error = typeof parsed?.error === 'string' && /^[a-z_]{1,64}$/.test(parsed.error) ? parsed.error : 'no error code';
          throw new SignInError('exchange', `token endpoint answered HTTP ${res.status} (${error})`);
        }
        if (!parsed) throw new SignInError('exchange', 'token endpoint answered with no JSON object');
        body = parsed;
      } catch (err) {
        if (err instanceof SignInError) throw err;
        throw new SignInError('exchange', `token endpoint unreachable: ${(err as Error).name}`);
      }
      const idToken = body.id_token;
      if (typeof idToken !== 'string') throw new SignInError('id_token', 'token response has no id_token');

      const jwksUri = config.auth.jwksUri ?? m.jwksUri;
      if (keys?.uri !== jwksUri) keys = { uri: jwksUri, set: createRemoteJWKSet(new URL(jwksUri), { timeoutDuration: HTTP_TIMEOUT_MS }) };
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(idToken, keys.set, {
          issuer: config.auth.issuer,
          audience: login.clientId,
          algorithms: config.auth.algorithms,
          clockTolerance: Math.round(config.auth.clockTolerance / 1000),
          requiredClaims: ['sub', 'exp', 'iat'],
        }));
      } catch (err) {
        throw new SignInError('id_token', `id_token rejected: ${(err as { code?: string }).code ?? (err as Error).name}`);
      }
      if (payload.nonce !== nonce) throw new SignInError('id_token', 'id_token nonce does not match');
      const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
      if ((payload.azp !== undefined || audiences.length > 1) && payload.azp !== login.clientId) {
        throw new SignInError('id_token', 'id_token azp is not this client');
      }
      if (typeof payload.sub !== 'string' || payload.sub === '' || typeof payload.iss !== 'string') {
        throw new SignInError('id_token', 'id_token has no subject');
      }
      return payload as JWTPayload & { iss: string; sub: string };
    },
  };
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

function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(303).headers({ location, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' }).send();
}

/** A same-origin path short enough to travel in the pre-login cookie, else the default. */
function loginReturnTo(raw: unknown): string {
  const returnTo = safeReturnTo(raw, RETURN_DEFAULT);
  return returnTo.length <= LOGIN_RETURN_TO_MAX ? returnTo : RETURN_DEFAULT;
}

function safeJson(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
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
