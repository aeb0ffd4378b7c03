/**
 * Browser sessions (SPEC §4 step 3): who is signed in to Switchboard in this browser, as
 * established by `/login` against the MCP authorization server. The connect page compares
 * this `iss`+`sub` with the elicitation's (phishing protection), so the session must be
 * unforgeable and unstealable by page content:
 *
 * - server-side record `browser:<random id>` in the state store (any replica can read it;
 *   sign-out deletes it, so a copied cookie dies with the session);
 * - cookie `sb_session` = the id signed with the HKDF-derived `secrets.cookieKey` HMAC,
 *   `HttpOnly; SameSite=Lax; Path=/`, `Secure` unless `publicUrl` is plain-http loopback;
 * - a fresh id on every sign-in (no session fixation);
 * - a per-session CSRF token that every form carries, compared in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { userKeyOf } from '../auth/principal.js';
import type { Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import { createSigner, type Signer } from './secrets.js';

export const SESSION_COOKIE = 'sb_session';
export const SESSION_TTL_MS = 8 * 60 * 60_000;
const KEY_PREFIX = 'browser:';
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
}

export interface BrowserSessions {
  /** The signed-in user of this request, or undefined (no, tampered or expired cookie). */
  current(request: FastifyRequest): Promise<BrowserUser | undefined>;
  /**
   * Starts a new session (fresh id and CSRF token) and sets the cookie. With `previous`, the
   * session that request's cookie names is deleted first (re-sign-in, account switch).
   */
  start(reply: FastifyReply, who: { iss: string; sub: string; label?: string }, previous?: FastifyRequest): Promise<BrowserUser>;
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
}

export function createBrowserSessions(store: StateStore, config: Config): BrowserSessions {
  const key = config.secrets.cookieKey;
  if (!key) throw new Error('browser sign-in needs secrets.cookieKey (at least 32 bytes) to sign its session cookie');
  const signer = createSigner(key);
  const secure = cookieSecure(config);

  function sessionIds(request: FastifyRequest): string[] {
    return readCookies(request, SESSION_COOKIE)
      .map((signed) => signer.verify(signed))
      .filter((id): id is string => id !== undefined && /^[A-Za-z0-9_-]{43}$/.test(id));
  }

  async function load(id: string): Promise<BrowserUser | undefined> {
    const raw = await store.getValue(KEY_PREFIX + id);
    const record = raw === undefined ? undefined : parseRecord(raw);
    if (!record || record.createdAt + SESSION_TTL_MS <= Date.now()) return undefined;
    return { sessionId: id, iss: record.iss, sub: record.sub, userKey: record.userKey, csrfToken: record.csrfToken, label: record.label };
  }

  return {
    async current(request) {
      // A browser may hold several (e.g. one tossed in from a sibling host): the first live one wins.
      for (const id of sessionIds(request)) {
        const user = await load(id);
        if (user) return user;
      }
      return undefined;
    },

    async start(reply, who, previous) {
      if (previous) for (const id of sessionIds(previous)) await store.deleteValue(KEY_PREFIX + id);
      const sessionId = randomBytes(32).toString('base64url');
      const record: SessionRecord = {
        iss: who.iss,
        sub: who.sub,
        userKey: userKeyOf(who.iss, who.sub),
        csrfToken: randomBytes(32).toString('base64url'),
        label: who.label?.trim() || who.sub,
        createdAt: Date.now(),
      };
      await store.putValue(KEY_PREFIX + sessionId, JSON.stringify(record), SESSION_TTL_MS);
      reply.header('set-cookie', serializeCookie(SESSION_COOKIE, signer.sign(sessionId), { maxAgeMs: SESSION_TTL_MS, path: '/', secure }));
      return { sessionId, iss: record.iss, sub: record.sub, userKey: record.userKey, csrfToken: record.csrfToken, label: record.label };
    },

    async end(request, reply) {
      for (const id of sessionIds(request)) await store.deleteValue(KEY_PREFIX + id);
      reply.header('set-cookie', serializeCookie(SESSION_COOKIE, '', { maxAgeMs: 0, path: '/', secure }));
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

/**
 * A same-origin absolute path to send the browser back to, or `fallback`. Refuses anything a
 * browser could read as another origin: `//host`, `/\host`, schemes, control characters
 * (browsers strip tabs and newlines from URLs, so `/\t/evil` would become `//evil`).
 */
export function safeReturnTo(raw: unknown, fallback = '/connections'): string {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 2048) return fallback;
  if (raw[0] !== '/' || raw[1] === '/' || raw.includes('\\')) return fallback;
  if (/[\u0000-\u001f\u007f]/.test(raw)) return fallback;
  const base = 'http://return-to.invalid';
  if (!URL.canParse(raw, base)) return fallback;
  const url = new URL(raw, base);
  if (url.origin !== base) return fallback;
  return url.pathname + url.search;
}

/** Whether cookies get `Secure`: always, except when publicUrl is plain http on loopback. */
export function cookieSecure(config: Config): boolean {
  const url = new URL(config.publicUrl);
  return !(url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname));
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
