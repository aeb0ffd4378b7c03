/**
 * Verifies OAuth access tokens as an OAuth 2.1 resource server (MCP authorization spec,
 * "Token Validation"): signature against the issuer's JWKS (rotation handled by jose's
 * remote key set refetching on an unknown `kid`), an algorithm allowlist, `iss`, `aud`
 * equal to our audience (RFC 8707: tokens minted for another resource are refused),
 * `exp`/`nbf` with a small leeway.
 *
 * Verified tokens are cached until their `exp` so that the hot path pays for one signature
 * check per token, not per message. The cache is bounded; the oldest entries go first.
 */
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { AuthError } from './errors.js';
import { discoverJwksUri } from './discovery.js';
import { frozenClaims, scopesOf, userKeyOf, type Principal } from './principal.js';

export interface TokenVerifierOptions {
  issuer: string;
  /**
   * Every audience some endpoint accepts; each endpoint checks its own (authenticate.ts). A
   * function is asked on every verification: the backends, and so the audiences, change on a
   * config reload (config/live-config.ts).
   */
  audience: string | string[] | (() => string[]);
  algorithms: readonly string[];
  clockToleranceMs: number;
  /** Overrides discovery. */
  jwksUri?: string;
  /** A key set to use instead of fetching one (the embedded development issuer; broker mode's own keys). */
  keySet?: JWTVerifyGetKey;
  /**
   * Whose user `sub` names, when that is not `issuer` (broker mode, SPEC §8: the gateway
   * issues the token but speaks for a user of the upstream identity provider). The
   * principal's `iss` and `userKey` then name that provider, so a user is the same user in
   * both modes and in the browser session that `/login` starts.
   */
  identityIssuer?: string;
  /** The JWT `typ` required (broker mode: `at+jwt`, RFC 9068 §4, so its ID tokens never pass as access tokens). */
  typ?: string;
  cacheSize?: number;
}

export interface TokenVerifier {
  verify(token: string): Promise<Principal>;
  /**
   * True while a principal this verifier returned is still good (its `exp`, with the clock
   * tolerance): what a cached verification is checked against, so that a caller keeping one
   * (authenticate.ts, per connection) keeps it no longer than this verifier's own cache would.
   */
  isCurrent(principal: Principal): boolean;
}

export function createTokenVerifier(options: TokenVerifierOptions): TokenVerifier {
  const cacheSize = options.cacheSize ?? 10_000;
  const cache = new Map<string, Principal>();
  let keySet: Promise<JWTVerifyGetKey> | undefined = options.keySet ? Promise.resolve(options.keySet) : undefined;

  function getKeySet(): Promise<JWTVerifyGetKey> {
    if (!keySet) {
      keySet = (options.jwksUri ? Promise.resolve(options.jwksUri) : discoverJwksUri(options.issuer)).then((uri) =>
        createRemoteJWKSet(new URL(uri), { timeoutDuration: 5_000, cooldownDuration: 30_000 }),
      );
      // A failed discovery must not be remembered: the issuer may just be starting.
      keySet.catch(() => {
        keySet = undefined;
      });
    }
    return keySet;
  }

  function remember(token: string, principal: Principal): void {
    if (cache.size >= cacheSize) cache.delete(cache.keys().next().value!);
    cache.set(token, principal);
  }

  const isCurrent = (principal: Principal): boolean => principal.exp * 1000 > Date.now() - options.clockToleranceMs;

  return {
    isCurrent,
    async verify(token) {
      const cached = cache.get(token);
      if (cached) {
        if (isCurrent(cached)) return cached;
        cache.delete(token);
      }
      let keys: JWTVerifyGetKey;
      try {
        keys = await getKeySet();
      } catch (err) {
        throw new AuthError('temporarily_unavailable', `token cannot be verified now: ${(err as Error).message}`);
      }
      try {
        const { payload } = await jwtVerify(token, keys, {
          issuer: options.issuer,
          audience: typeof options.audience === 'function' ? options.audience() : options.audience,
          algorithms: [...options.algorithms],
          clockTolerance: Math.round(options.clockToleranceMs / 1000),
          requiredClaims: ['sub', 'exp'],
          ...(options.typ ? { typ: options.typ } : {}),
        });
        const iss = options.identityIssuer ?? payload.iss!;
        const principal: Principal = {
          iss,
          sub: payload.sub!,
          userKey: userKeyOf(iss, payload.sub!),
          scopes: scopesOf(payload),
          exp: payload.exp!,
          claims: frozenClaims(payload),
        };
        remember(token, principal);
        return principal;
      } catch (err) {
        // Keys that cannot be fetched say nothing about the token: 503, not 401, so that the
        // client keeps its token instead of sending its user through sign-in again.
        if (keysUnreachable(err)) throw new AuthError('temporarily_unavailable', 'token cannot be verified now: the issuer\'s keys cannot be fetched');
        throw new AuthError('invalid_token', describeJoseError(err));
      }
    },
  };
}

/**
 * A failure to fetch the JWKS (network error, timeout, an answer that is not a key set), as
 * opposed to a token that the keys refute. jose reports fetch failures as JWKSTimeout, as
 * a non-2xx JOSEError, or as the fetch's own TypeError.
 */
function keysUnreachable(err: unknown): boolean {
  if (err instanceof joseErrors.JWKSTimeout || err instanceof joseErrors.JWKSInvalid) return true;
  if (err instanceof joseErrors.JOSEError) return err.code === 'ERR_JOSE_GENERIC' && /response|fetch/i.test(err.message);
  return err instanceof TypeError || (err as { code?: string })?.code === 'ECONNREFUSED';
}

function describeJoseError(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'token expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `token claim "${err.claim}" is invalid`;
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'token algorithm not allowed';
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'token signature invalid';
  if (err instanceof joseErrors.JWKSNoMatchingKey) return 'token signed by an unknown key';
  if (err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JWSInvalid) return 'token malformed';
  return 'token invalid';
}
