/**
 * Browser sessions (SPEC §4 step 3): who is signed in to Switchboard in this browser, as
 * established by `/login` against the MCP authorization server. The connect page compares
 * this `iss`+`sub` with the elicitation's (phishing protection), so the session must be
 * unforgeable and unstealable by page content:
 *
 * - server-side record `browser:<random id>` in the state store (any replica can read it;
 *   sign-out deletes it, so a copied cookie dies with the session);
 * - cookie `__Host-sb_session` (`sb_session` when `publicUrl` is plain http) = the id signed
 *   with the HKDF-derived `secrets.cookieKey` HMAC, `HttpOnly; SameSite=Lax; Path=/`, `Secure`
 *   unless `publicUrl` is plain-http loopback (see {@link cookiePolicy});
 * - a request carrying that cookie more than once is signed out: a sibling host can add its
 *   own (validly signed) session with a longer Path, which the browser sends first;
 * - a fresh id on every sign-in (no session fixation);
 * - a per-session CSRF token that every form carries, compared in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { userKeyOf } from '../auth/principal.js';
import type { Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import { createSigner, type Signer } from '../state/secrets.js';
import { ValueKeys } from '../state/value-keys.js';

export const SESSION_TTL_MS = 8 * 60 * 60_000;
/** Largest urlencoded form body accepted by the page routes. */
export const FORM_BODY_LIMIT = 16 * 1024;

export interface BrowserUser {
  sessionId: string;
  iss: string;
  sub: string;
  userKey: string;
  csrfToken: string;
  /** What the pages show for this user (name, username or email from the id_token; else `sub`). */
  label: string;
  /**
   * The upstream claims access policies read (`auth.tenantClaim`, `access.claims`), from the
   * sign-in's ID token; broker mode carries them into the gateway's own tokens.
   */
  claims?: Record<string, unknown>;
}

export interface BrowserSessions {
  /** The signed-in user of this request, or undefined (no, tampered or expired cookie). */
  current(request: FastifyRequest): Promise<BrowserUser | undefined>;
  /**
   * Starts a new session (fresh id and CSRF token) and sets the cookie. With `previous`, the
   * session that request's cookie names is deleted first (re-sign-in, account switch).
   */
  start(reply: FastifyReply, who: { iss: string; sub: string; label?: string; claims?: Record<string, unknown> }, previous?: FastifyRequest): Promise<BrowserUser>;
  /** Deletes the session server-side and clears the cookie. */
  end(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** Constant-time comparison of a submitted form token with the session's. */
  csrfValid(user: BrowserUser, token: unknown): boolean;
}

interface SessionRecord {
  iss: string;
  sub: string;
  userKey: string;
  csrfToken: string;
  label: string;
  createdAt: number;
  claims?: Record<string, unknown>;
}

export function createBrowserSessions(store: StateStore, config: Config): BrowserSessions {
  const key = config.secrets.cookieKey;
  if (!key) throw new Error('browser sign-in needs secrets.cookieKey (at least 32 bytes) to sign its session cookie');
  const signer = createSigner(key);
  const cookies = cookiePolicy(config);
  const sessionCookie = (value: string, maxAgeMs: number) => serializeCookie(cookies.session, value, { maxAgeMs, path: '/', secure: cookies.secure });
  const validId = (id: string | undefined): id is string => id !== undefined && /^[A-Za-z0-9_-]{43}$/.test(id);

  /** Every validly signed id the request names (to delete them all at sign-in and sign-out). */
  function sessionIds(request: FastifyRequest): string[] {
    return readCookies(request, cookies.session)
      .map((signed) => signer.verify(signed))
      .filter(validId);
  }

  async function load(id: string): Promise<BrowserUser | undefined> {
    const raw = await store.getValue(ValueKeys.browserSession(id));
    const record = raw === undefined ? undefined : parseRecord(raw);
    if (!record || record.createdAt + SESSION_TTL_MS <= Date.now()) return undefined;
    return toUser(id, record);
  }

  return {
    async current(request) {
      // Two or more: one may be tossed in from a sibling host, and we cannot tell which.
      const id = onlySignedCookie(request, cookies.session, signer);
      return validId(id) ? load(id) : undefined;
    },

    async start(reply, who, previous) {
      if (previous) for (const id of sessionIds(previous)) await store.deleteValue(ValueKeys.browserSession(id));
      const sessionId = randomBytes(32).toString('base64url');
      const record: SessionRecord = {
        iss: who.iss,
        sub: who.sub,
        userKey: userKeyOf(who.iss, who.sub),
        csrfToken: randomBytes(32).toString('base64url'),
        label: who.label?.trim() || who.sub,
        createdAt: Date.now(),
        ...(who.claims && Object.keys(who.claims).length ? { claims: who.claims } : {}),
      };
      await store.putValue(ValueKeys.browserSession(sessionId), JSON.stringify(record), SESSION_TTL_MS);
      reply.header('set-cookie', sessionCookie(signer.sign(sessionId), SESSION_TTL_MS));
      return toUser(sessionId, record);
    },

    async end(request, reply) {
      for (const id of sessionIds(request)) await store.deleteValue(ValueKeys.browserSession(id));
      reply.header('set-cookie', sessionCookie('', 0));
    },

    csrfValid(user, token) {
      if (typeof token !== 'string' || token.length === 0 || token.length > 256) return false;
      // Digests have equal length, so timingSafeEqual never throws and length leaks nothing.
      const a = createHash('sha256').update(token).digest();
      const b = createHash('sha256').update(user.csrfToken).digest();
      return timingSafeEqual(a, b);
    },
  };
}

function toUser(sessionId: string, record: SessionRecord): BrowserUser {
  const { iss, sub, userKey, csrfToken, label, claims } = record;
  return { sessionId, iss, sub, userKey, csrfToken, label, ...(claims ? { claims } : {}) };
}

function parseRecord(raw: string): SessionRecord | undefined {
  try {
    const r = JSON.parse(raw) as Partial<SessionRecord>;
    const strings = [r.iss, r.sub, r.userKey, r.csrfToken, r.label];
    if (strings.some((s) => typeof s !== 'string' || s === '') || typeof r.createdAt !== 'number') return undefined;
    return r as SessionRecord;
  } catch {
    return undefined;
  }
}

/** `/login?returnTo=<encoded same-origin path>` (an unsafe target becomes `/connections`). */
export function loginUrl(returnTo: string): string {
  return `/login?returnTo=${encodeURIComponent(safeReturnTo(returnTo))}`;
}

/** Longest `returnTo` kept, before and after normalization (2 KiB). */
export const RETURN_TO_MAX = 2048;

/**
 * A same-origin absolute path to send the browser back to, or `fallback`. Refuses anything a
 * browser could read as another origin: `//host`, `/\host`, schemes, control characters
 * (browsers strip tabs and newlines from URLs, so `/\t/evil` would become `//evil`).
 *
 * What is returned is checked, not only what came in: URL parsing removes dot segments
 * (RFC 3986 §5.2.4, also `%2e%2e`), so the harmless-looking `/.//evil.example/x` normalizes
 * to `//evil.example/x`, a network-path reference (§4.2) to another host.
 */
export function safeReturnTo(raw: unknown, fallback = '/connections'): string {
  if (typeof raw !== 'string' || !isLocalPath(raw)) return fallback;
  const base = 'http://return-to.invalid';
  if (!URL.canParse(raw, base)) return fallback;
  const url = new URL(raw, base);
  if (url.origin !== base) return fallback;
  const path = url.pathname + url.search;
  return isLocalPath(path) ? path : fallback;
}

/** `/` not followed by `/` or `\`; no backslash or control character anywhere; at most 2 KiB. */
function isLocalPath(path: string): boolean {
  return path.length <= RETURN_TO_MAX && /^\/(?![/\\])/.test(path) && !path.includes('\\') && !/[\u0000-\u001f\u007f]/.test(path);
}

/** Whether cookies get `Secure`: always, except when publicUrl is plain http on loopback. */
export function cookieSecure(config: Config): boolean {
  const url = new URL(config.publicUrl);
  return !(url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname));
}

/** Names and attributes of the two browser cookies for this `publicUrl`. */
export interface CookiePolicy {
  /** The browser session: `__Host-sb_session` or `sb_session`. */
  session: string;
  /** The pre-login binding of `/login`: `__Host-sb_login` or `sb_login`. */
  login: string;
  /** Path of the pre-login cookie: `/` for `__Host-`, else `/login`. */
  loginPath: string;
  secure: boolean;
}

/**
 * With an https `publicUrl`, `__Host-` cookies (RFC 6265bis §4.1.3.2): the browser keeps them
 * only when set by this very host with `Secure; Path=/` and no `Domain`, so no other host of
 * the same site can plant or overwrite one (cookie tossing). Browsers refuse them from plain
 * http origins, so development on http keeps the unprefixed names (and `sb_login` its
 * Path=/login).
 */
export function cookiePolicy(config: Config): CookiePolicy {
  if (new URL(config.publicUrl).protocol === 'https:') return { session: '__Host-sb_session', login: '__Host-sb_login', loginPath: '/', secure: true };
  return { session: 'sb_session', login: 'sb_login', loginPath: '/login', secure: cookieSecure(config) };
}

/** Every value of cookie `name` in the request's Cookie header(s), in order. */
export function readCookies(request: FastifyRequest, name: string): string[] {
  const header = request.headers.cookie;
  if (!header) return [];
  const values: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1 || part.slice(0, eq).trim() !== name) continue;
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    values.push(value);
  }
  return values;
}

/**
 * The verified value of signed cookie `name` when the request carries exactly one; else
 * undefined. Two of the same name mean another host or path planted one (RFC 6265 §8.6), and
 * nothing says which: a validly signed cookie may still be someone else's.
 */
export function onlySignedCookie(request: FastifyRequest, name: string, signer: Signer): string | undefined {
  const values = readCookies(request, name);
  return values.length === 1 ? signer.verify(values[0]!) : undefined;
}

export interface CookieOptions {
  /** 0 deletes the cookie. */
  maxAgeMs: number;
  path: string;
  secure: boolean;
}

/** `name=value; Max-Age; Path; HttpOnly; SameSite=Lax[; Secure]` (values are base64url + '.'). */
export function serializeCookie(name: string, value: string, o: CookieOptions): string {
  if (!/^[A-Za-z0-9._-]*$/.test(value)) throw new Error('cookie value must be base64url text');
  const parts = [`${name}=${value}`, `Max-Age=${Math.max(0, Math.floor(o.maxAgeMs / 1000))}`, `Path=${o.path}`, 'HttpOnly', 'SameSite=Lax'];
  if (o.secure) parts.push('Secure');
  return parts.join('; ');
}

/** Signs and verifies small cookie values (re-exported so routes need one import). */
export function cookieSigner(config: Config): Signer {
  const key = config.secrets.cookieKey;
  if (!key) throw new Error('browser sign-in needs secrets.cookieKey (at least 32 bytes) to sign its cookies');
  return createSigner(key);
}

/**
 * Parses `application/x-www-form-urlencoded` bodies into a flat `Record<string, string>` (the
 * first value of a repeated field wins), within a small body limit. Register it inside the
 * encapsulated scope of the page routes: the gateway itself accepts JSON only.
 */
export function registerFormParser(scope: FastifyInstance): void {
  scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
    const fields: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const [k, v] of new URLSearchParams(body as string)) if (!(k in fields)) fields[k] = v;
    done(null, fields);
  });
}
