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
  claims: JWTPayload;
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
