/**
 * The broker's signing keys (`auth.broker.signingKeys`, SPEC §8): the first key signs, every
 * key verifies, so rotation is "put the new key first, drop the old one once its tokens have
 * expired" (`accessTokenTtl`). The same public keys serve two readers: the published JWKS
 * (`/oauth2/jwks`, for anyone checking our tokens) and the gateway's own token verifier,
 * which gets them as a local key set — no network fetch on the hot path.
 *
 * Without configured keys one EC P-256 key is generated per process: tokens then die with
 * the process and another replica cannot verify them, so the config schema insists on
 * configured keys with redis (as with `secrets`).
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, createLocalJWKSet, type JWK, type JWTVerifyGetKey } from 'jose';
import { signingAlgorithmOf, type SigningAlgorithm } from '../config/broker-schema.js';

export interface BrokerKeys {
  /** Private JWKs for oidc-provider's keystore, signing key first. */
  privateJwks: JWK[];
  /** The key new tokens are signed with. */
  signing: { alg: SigningAlgorithm; kid: string };
  /** Algorithms of all keys (what the verifier accepts). */
  algorithms: string[];
  /** Every public key, for verifying our own tokens in-process. */
  keySet: JWTVerifyGetKey;
  /** True when the key was made at start (single replica only). */
  generated: boolean;
}

export async function loadSigningKeys(pems: readonly string[] | undefined): Promise<BrokerKeys> {
  const generated = !pems?.length;
  const keys: KeyObject[] = generated ? [generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey] : pems.map((pem) => createPrivateKey(pem));
  const privateJwks: Array<JWK & { kid: string; alg: SigningAlgorithm }> = [];
  const publicJwks: JWK[] = [];
  for (const key of keys) {
    // The config schema has checked every key already; this only guards hand-built configs.
    const alg = signingAlgorithmOf(key);
    if (!alg) throw new Error('auth.broker.signingKeys: unsupported key type');
    const priv = key.export({ format: 'jwk' }) as JWK;
    const pub: JWK = { kty: priv.kty, ...(priv.crv ? { crv: priv.crv } : {}), ...(priv.x ? { x: priv.x } : {}), ...(priv.y ? { y: priv.y } : {}), ...(priv.n ? { n: priv.n, e: priv.e } : {}) };
    // RFC 7638 thumbprint: the same key gets the same kid on every replica.
    const kid = await calculateJwkThumbprint(pub);
    if (publicJwks.some((k) => k.kid === kid)) continue;
    privateJwks.push({ ...priv, kid, alg, use: 'sig' });
    publicJwks.push({ ...pub, kid, alg, use: 'sig' });
  }
  return {
    privateJwks,
    signing: { alg: privateJwks[0]!.alg, kid: privateJwks[0]!.kid },
    algorithms: [...new Set(privateJwks.map((k) => k.alg))],
    keySet: createLocalJWKSet({ keys: publicJwks }),
    generated,
  };
}
