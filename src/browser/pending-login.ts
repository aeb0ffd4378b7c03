/**
 * The sign-ins a browser has started and not finished (SPEC §2 `/login`), kept in its signed
 * pre-login cookie instead of the store: an unauthenticated `GET /login` costs the store
 * nothing (issue 13: 2,000 requests in 8 s left 2,000 keys of ~2.2 KB for 10 minutes).
 *
 * - The cookie lists, per sign-in, its `state`, its `returnTo` (at most
 *   {@link LOGIN_RETURN_TO_MAX} characters) and when it started; the newest
 *   {@link MAX_PENDING} are kept, so a few tabs can sign in at once. A callback whose state
 *   the browser's own cookie does not list was started elsewhere (login CSRF) and is refused.
 * - The PKCE verifier (RFC 7636 §4.1: high-entropy, never sent to the authorization server)
 *   and the OIDC nonce are HMACs of the random state under a key derived from
 *   `secrets.cookieKey`: unguessable without the key, so nothing secret is stored anywhere.
 * - Single use: a state whose code was redeemed is remembered in the store until it would
 *   have expired — one small key per completed sign-in, never per `GET /login`.
 */
import { createHmac, hkdfSync } from 'node:crypto';

/** What a pending sign-in remembers. */
export interface PendingLogin {
  state: string;
  returnTo: string;
  /** ms since the epoch. */
  createdAt: number;
}

/** How long a sign-in may take from `/login` to the callback. */
export const PENDING_LOGIN_TTL_MS = 10 * 60_000;
/** Longer `returnTo` values are replaced by the default (they would not fit the cookie). */
export const LOGIN_RETURN_TO_MAX = 512;
/** Sign-ins one browser may have under way at once (the cookie stays under 4 KiB). */
export const MAX_PENDING = 4;
/** The `state` this module issues: 32 random bytes, base64url. */
export const STATE_FORMAT = /^[A-Za-z0-9_-]{43}$/;

export interface PendingLogins {
  /** The live sign-ins in a verified cookie value (none for a missing or malformed one). */
  read(cookieValue: string | undefined, now?: number): PendingLogin[];
  /** The cookie value (to be signed) for `pending`: the newest {@link MAX_PENDING}, oldest first. */
  write(pending: readonly PendingLogin[]): string;
  /** RFC 7636 `code_verifier` for a state (43 base64url characters). */
  verifier(state: string): string;
  /** The OIDC `nonce` for a state. */
  nonce(state: string): string;
}

export function createPendingLogins(cookieKey: string): PendingLogins {
  const key = Buffer.from(hkdfSync('sha256', Buffer.from(cookieKey, 'utf8'), Buffer.alloc(0), 'switchboard login pkce verifier and nonce', 32));
  const mac = (purpose: string, state: string) => createHmac('sha256', key).update(`${purpose}\0${state}`).digest('base64url');
  return {
    read(cookieValue, now = Date.now()) {
      if (!cookieValue) return [];
      let raw: unknown;
      try {
        raw = JSON.parse(Buffer.from(cookieValue, 'base64url').toString('utf8'));
      } catch {
        return [];
      }
      if (!Array.isArray(raw)) return [];
      const pending: PendingLogin[] = [];
      for (const entry of raw.slice(-MAX_PENDING)) {
        if (!Array.isArray(entry)) continue;
        const [state, returnTo, createdAt] = entry as unknown[];
        if (typeof state !== 'string' || typeof returnTo !== 'string' || typeof createdAt !== 'number') continue;
        if (now - createdAt > PENDING_LOGIN_TTL_MS || now < createdAt) continue;
        pending.push({ state, returnTo, createdAt });
      }
      return pending;
    },
    write(pending) {
      const entries = pending.slice(-MAX_PENDING).map((p) => [p.state, p.returnTo, p.createdAt]);
      return Buffer.from(JSON.stringify(entries)).toString('base64url');
    },
    verifier: (state) => mac('code_verifier', state),
    nonce: (state) => mac('nonce', state),
  };
}
