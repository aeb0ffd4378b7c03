/**
 * DPoP (RFC 9449): the key a link holds and the proofs it signs, for the token endpoint of a
 * backend's authorization server (providers/dpop-token.ts) and for each request to the backend
 * (dpop-exchange.ts). Issue 42 cause 12.
 *
 * - One ES256 key pair per link (`generateDpopKey`), its private JWK sealed with the link's
 *   tokens in the vault (connect/token-vault.ts), exactly as the refresh token is; it is never
 *   logged, and a proof carries only the public half (`jwk` header, §4.2).
 * - A proof (§4.2): header `typ: dpop+jwt`, `alg: ES256`, `jwk`; claims `jti` (random, never
 *   reused), `htm`, `htu` (the target URI without query and fragment), `iat`, and `ath` (the
 *   base64url SHA-256 of the access token) on requests to a resource, `nonce` when the server
 *   gave one.
 * - Nonces (§8, §9): the latest `DPoP-Nonce` each origin sent is remembered by this replica
 *   (a bounded map) and put in every later proof to that origin; a malformed one is never kept.
 * - The authorization the backend client sends (`DPoP <token>`) is bound to its key here
 *   ({@link bindDpop}), so that the backend client, which only sees the header, can sign each
 *   request: the header's digest is the map key (no token is kept as a key), the map is bounded.
 */
import { createHash, randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from 'jose';

/** The one signing algorithm the gateway proves with (RFC 9449 §4.2 requires an asymmetric one; ES256 is the common one). */
export const DPOP_ALG = 'ES256';

/** The private half of a link's key, as sealed in the vault: an EC P-256 JWK. */
export interface DpopPrivateJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d: string;
}

/** What one proof is for: the request's method and URI, the access token it presents (resource requests), the server's nonce. */
export interface ProofTarget {
  htm: string;
  htu: string;
  accessToken?: string;
  nonce?: string;
}

/** A link's key, ready to sign. */
export interface DpopKey {
  /** The public JWK put in each proof's header. */
  readonly publicJwk: JWK;
  /** A fresh proof JWT for one request (a new `jti` each time). */
  proof(target: ProofTarget): Promise<string>;
  /** RFC 7638 thumbprint of the public key (what a bound token's `cnf.jkt` names). */
  thumbprint(): Promise<string>;
}

/** A new key pair for a link; the private JWK is what the vault keeps. */
export async function generateDpopKey(): Promise<DpopPrivateJwk> {
  const { privateKey } = await generateKeyPair(DPOP_ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { kty: 'EC', crv: 'P-256', x: jwk.x!, y: jwk.y!, d: jwk.d! };
}

/** Whether a stored value is a private key the gateway can sign with (the vault reads it back). */
export function isDpopPrivateJwk(value: unknown): value is DpopPrivateJwk {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return v.kty === 'EC' && v.crv === 'P-256' && [v.x, v.y, v.d].every((s) => typeof s === 'string' && /^[A-Za-z0-9_-]{43}$/.test(s));
}

/** The signing key of a stored private JWK. */
export async function dpopKey(jwk: DpopPrivateJwk): Promise<DpopKey> {
  const privateKey = await importJWK({ ...jwk, alg: DPOP_ALG }, DPOP_ALG);
  const publicJwk: JWK = { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y };
  return {
    publicJwk,
    thumbprint: () => calculateJwkThumbprint(publicJwk, 'sha256'),
    proof: (target) => {
      const claims: Record<string, unknown> = { jti: randomUUID(), htm: target.htm, htu: htuOf(target.htu), iat: Math.floor(Date.now() / 1000) };
      if (target.accessToken !== undefined) claims.ath = accessTokenHash(target.accessToken);
      if (target.nonce !== undefined) claims.nonce = target.nonce;
      return new SignJWT(claims).setProtectedHeader({ typ: 'dpop+jwt', alg: DPOP_ALG, jwk: publicJwk }).sign(privateKey);
    },
  };
}

/** `htu` (RFC 9449 §4.2): the target URI without its query and fragment. */
export function htuOf(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

/** `ath` (RFC 9449 §4.2): base64url of the SHA-256 of the ASCII access token. */
export function accessTokenHash(accessToken: string): string {
  return createHash('sha256').update(accessToken, 'ascii').digest('base64url');
}

// ------------------------------------------------------------------ nonces ---

/** RFC 9449 §8.1: `DPoP-Nonce = 1*NQCHAR`, NQCHAR = %x21 / %x23-5B / %x5D-7E. Bounded here. */
const NONCE = /^[\x21\x23-\x5B\x5D-\x7E]{1,1024}$/;
const MAX_ORIGINS = 1024;
const nonces = new Map<string, string>();

/**
 * A response's `DPoP-Nonce`: undefined when absent, `malformed` when it is not one value of
 * the RFC's syntax (several headers, which arrive joined or as a list, are malformed too).
 */
export function readDpopNonce(value: string | string[] | null | undefined): string | 'malformed' | undefined {
  if (value === null || value === undefined) return undefined;
  if (Array.isArray(value)) return 'malformed';
  return NONCE.test(value) ? value : 'malformed';
}

/** The nonce to put in the next proof to `url`'s origin, if that origin gave one. */
export function dpopNonceFor(url: string): string | undefined {
  return nonces.get(new URL(url).origin);
}

/** Remembers the nonce `url`'s origin sent (the latest wins); a malformed or absent one changes nothing. */
export function rememberDpopNonce(url: string, value: string | string[] | null | undefined): void {
  const nonce = readDpopNonce(value);
  if (nonce === undefined || nonce === 'malformed') return;
  const origin = new URL(url).origin;
  nonces.delete(origin);
  nonces.set(origin, nonce);
  if (nonces.size > MAX_ORIGINS) nonces.delete(nonces.keys().next().value!);
}

// ---------------------------------------------------------------- bindings ---

const MAX_BINDINGS = 10_000;
const bindings = new Map<string, DpopKey>();

function bindingKey(authorization: string): string {
  return createHash('sha256').update(authorization).digest('base64url');
}

/**
 * Binds `DPoP <token>` to the link's key until the backend client sends it
 * ({@link dpopKeyFor}); bound again each time the link is read (connect/upstream-auth.ts), so
 * the oldest bindings are those no request uses any more, and they go first.
 */
export function bindDpop(authorization: string, key: DpopKey): void {
  const k = bindingKey(authorization);
  bindings.delete(k);
  bindings.set(k, key);
  if (bindings.size > MAX_BINDINGS) bindings.delete(bindings.keys().next().value!);
}

/** The key bound to an authorization, when it is a `DPoP` one; `null` for a DPoP one with none bound. */
export function dpopKeyFor(authorization: string | undefined): DpopKey | null | undefined {
  if (authorization === undefined || !/^dpop /i.test(authorization)) return undefined;
  return bindings.get(bindingKey(authorization)) ?? null;
}

/** The access token of a `DPoP <token>` authorization. */
export function dpopToken(authorization: string): string {
  return authorization.slice(authorization.indexOf(' ') + 1).trim();
}
