/**
 * The verified caller. Identity is `iss` + `sub` (SPEC §5); `userKey` is a fixed-length,
 * opaque digest of the pair so that every state key starts with the user without putting
 * identifiers (or separator characters from them) into Redis keys.
 */
import { createHash } from 'node:crypto';
import type { JWTPayload } from 'jose';

export interface Principal {
  iss: string;
  sub: string;
  /** Digest of iss+sub: the first component of every state key. */
  userKey: string;
  scopes: ReadonlySet<string>;
  /** Seconds since the epoch; verified-token cache entries die here. */
  exp: number;
  /** Frozen, nested values included ({@link frozenClaims}): one object per verified token, read but never changed. */
  claims: JWTPayload;
}

/**
 * The token's claims frozen all the way down, made once when the token is verified. The
 * verified-token cache hands the same object to every call of the token, and what is computed
 * from it may be kept by its identity (policy/cel-rules.ts: a rule that reads only `jwt`), so
 * it must not change under them. The payload is JSON (jose parsed it): plain objects and
 * arrays, no cycles, as deep as the token is long.
 */
export function frozenClaims<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) frozenClaims(inner);
    Object.freeze(value);
  }
  return value;
}

export function userKeyOf(iss: string, sub: string): string {
  return createHash('sha256').update(iss).update('\0').update(sub).digest('base64url').slice(0, 32);
}

/** OAuth `scope` is space-separated (RFC 8693 §4.2); some issuers use `scp` arrays. */
export function scopesOf(claims: JWTPayload): Set<string> {
  const scopes = new Set<string>();
  if (typeof claims.scope === 'string') for (const s of claims.scope.split(' ')) if (s) scopes.add(s);
  if (Array.isArray(claims.scp)) for (const s of claims.scp) if (typeof s === 'string') scopes.add(s);
  return scopes;
}
