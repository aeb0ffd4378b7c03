/**
 * Exchanged tokens at rest (SPEC §8 "Token exchange"): one per user (`iss`+`sub`, as the
 * opaque userKey) and exchange target, in the shared store so that every replica uses it,
 * sealed like the vault (state/secrets.ts: AES-256-GCM, the store key as associated data,
 * so a value copied under another user's key does not open), and kept only until shortly
 * before it expires: {@link reuseUntil}.
 *
 * Nothing here logs or returns a token in a message.
 */
import type { TokenCipher } from '../state/secrets.js';
import type { StateStore } from '../state/store.js';
import type { ExchangedToken } from './exchange-grant.js';
import { ValueKeys } from '../state/value-keys.js';

/** A token is not handed out in its last minute (or last half, for short-lived ones). */
const MAX_MARGIN_MS = 60_000;
/**
 * How long a token is reused when the server did not say when it expires (`expires_in` is
 * only RECOMMENDED, RFC 8693 §2.2.1): short, and a backend's 401 replaces it sooner anyway.
 */
export const UNKNOWN_LIFETIME_MS = 5 * 60_000;

export interface CachedToken {
  accessToken: string;
  /** As stored: what {@link ExchangeCache.discard} compares before deleting. */
  sealed: string;
}

/**
 * Until when a token obtained now may be handed out: shortly before it expires. A whole
 * number of epoch ms: half an odd lifetime (a 5-second token 4 999 ms from expiry) is a
 * fraction, and the store's TTL is computed from this (issue 45 §2: Redis refused `PX
 * 2499.5`, which failed the user's call). The margin is rounded up, so a token is never
 * handed out later than half its remaining lifetime before it expires.
 */
export function reuseUntil(token: ExchangedToken, now = Date.now()): number {
  if (token.expiresAt === undefined) return Math.floor(now) + UNKNOWN_LIFETIME_MS;
  const expiresAt = Math.floor(token.expiresAt);
  const lifetime = expiresAt - Math.floor(now);
  return expiresAt - Math.min(MAX_MARGIN_MS, Math.ceil(Math.max(lifetime, 0) / 2));
}

export class ExchangeCache {
  constructor(
    private readonly store: StateStore,
    private readonly cipher: TokenCipher,
  ) {}

  /** The store key (and sealing context) of one user's token for one target. */
  key(userKey: string, target: string): string {
    return ValueKeys.exchange(userKey, target);
  }

  /** The cached token, unless absent, due, or not openable (then it is deleted). */
  async get(key: string): Promise<CachedToken | undefined> {
    const sealed = await this.store.getValue(key);
    if (sealed === undefined) return undefined;
    const entry = parse(this.cipher.open(sealed, key));
    if (!entry) {
      // Tampered, copied from another key, or sealed with another tokenKey.
      await this.store.deleteValueIf(key, sealed);
      return undefined;
    }
    return entry.reuseUntil > Date.now() ? { accessToken: entry.accessToken, sealed } : undefined;
  }

  /**
   * Stores a token obtained just now, for as long as it may be reused (not at all when less
   * than a second is left: not worth a round trip). The TTL is whole ms ({@link reuseUntil}).
   */
  async put(key: string, token: ExchangedToken): Promise<void> {
    const until = reuseUntil(token);
    const ttl = until - Date.now();
    if (ttl < 1_000) return;
    const sealed = this.cipher.seal(JSON.stringify({ v: 1, accessToken: token.accessToken, reuseUntil: until }), key);
    await this.store.putValue(key, sealed, ttl);
  }

  /** Forgets a token the backend refused, unless another replica replaced it meanwhile. */
  async discard(key: string, cached: CachedToken): Promise<void> {
    await this.store.deleteValueIf(key, cached.sealed);
  }
}

function parse(plain: string | undefined): { accessToken: string; reuseUntil: number } | undefined {
  if (plain === undefined) return undefined;
  try {
    const v = JSON.parse(plain) as Record<string, unknown>;
    if (v.v === 1 && typeof v.accessToken === 'string' && v.accessToken !== '' && typeof v.reuseUntil === 'number') return { accessToken: v.accessToken, reuseUntil: v.reuseUntil };
  } catch {
    // not ours
  }
  return undefined;
}
