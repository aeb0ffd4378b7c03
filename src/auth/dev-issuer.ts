/**
 * The embedded development issuer (SPEC §3): when Switchboard starts with no config it
 * mints its own ES256 key pair and signs a ready-to-use bearer token, so a newcomer can
 * connect at once. Verification still goes through jose and the normal verifier, with the
 * issuer's public key as a local key set; nothing about token checks is relaxed.
 */
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type JWTVerifyGetKey } from 'jose';

export interface DevIssuer {
  issuer: string;
  keySet: JWTVerifyGetKey;
  mint(claims: { sub: string; aud: string; scope?: string; ttlSeconds: number }): Promise<string>;
}

export async function createDevIssuer(issuer: string): Promise<DevIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'dev-1', alg: 'ES256', use: 'sig' };
  return {
    issuer,
    keySet: createLocalJWKSet({ keys: [jwk] }),
    mint: ({ sub, aud, scope, ttlSeconds }) =>
      new SignJWT(scope ? { scope } : {})
        .setProtectedHeader({ alg: 'ES256', kid: 'dev-1', typ: 'at+jwt' })
        .setIssuer(issuer)
        .setSubject(sub)
        .setAudience(aud)
        .setIssuedAt()
        .setExpirationTime(`${ttlSeconds}s`)
        .sign(privateKey),
  };
}
