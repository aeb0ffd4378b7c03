/**
 * The broker's signing keys (src/broker/signing-keys.ts): the first configured key signs,
 * every key verifies (rotation), kids are RFC 7638 thumbprints so every replica names a key
 * alike, and without keys one is generated for the process.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { importJWK, jwtVerify, SignJWT } from 'jose';
import { loadSigningKeys } from '../../src/broker/signing-keys.js';
import { ecPem, rsaPem } from './support.js';

const ed25519Pem = () => generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

test('the first key signs; every key verifies; algorithms follow the key types', async () => {
  const pems = [rsaPem(), ecPem(), ed25519Pem()];
  const keys = await loadSigningKeys(pems);
  assert.equal(keys.generated, false);
  assert.deepEqual(keys.algorithms, ['RS256', 'ES256', 'EdDSA']);
  assert.equal(keys.signing.alg, 'RS256');
  assert.equal(keys.signing.kid, keys.privateJwks[0]!.kid);
  for (const jwk of keys.privateJwks) {
    const token = await new SignJWT({}).setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid! }).setSubject('u').sign(await importJWK(jwk, jwk.alg));
    const { payload } = await jwtVerify(token, keys.keySet);
    assert.equal(payload.sub, 'u', `${jwk.alg} verifies`);
  }
});

test('the same PEM gets the same kid everywhere; a repeated key is listed once', async () => {
  const pem = ecPem();
  const [a, b] = await Promise.all([loadSigningKeys([pem]), loadSigningKeys([pem, pem])]);
  assert.equal(a.signing.kid, b.signing.kid);
  assert.equal(b.privateJwks.length, 1);
});

test('without configured keys one EC key is generated for the process', async () => {
  const keys = await loadSigningKeys(undefined);
  assert.equal(keys.generated, true);
  assert.equal(keys.signing.alg, 'ES256');
  assert.equal(keys.privateJwks.length, 1);
});
