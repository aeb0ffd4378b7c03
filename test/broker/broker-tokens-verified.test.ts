/**
 * The gateway's own tokens on the hot path (src/auth/token-verifier.ts with broker mode's
 * options, src/broker/broker.ts): verified against the broker's local key set (no fetch),
 * issuer `publicUrl`, `typ: at+jwt` required (RFC 9068 §4), and the principal named after
 * the upstream identity provider, so a user keeps one `userKey` across modes and matches the
 * browser session `/login` starts (src/browser/browser-sessions.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { importJWK, SignJWT } from 'jose';
import { prepareBroker } from '../../src/broker/broker.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { createTokenVerifier } from '../../src/auth/token-verifier.js';
import { parseConfig } from '../../src/config/load.js';
import { loadSigningKeys } from '../../src/broker/signing-keys.js';
import { ecPem } from './support.js';

const pem = ecPem();
const config = parseConfig({
  publicUrl: 'https://mcp.example.com',
  auth: { mode: 'broker', issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp', login: { clientId: 'switchboard' }, broker: { signingKeys: [pem] } },
  secrets: { cookieKey: 'c'.repeat(32), tokenKey: 't'.repeat(32) },
  backends: [{ name: 'hr', url: 'https://hr.example.com/mcp' }],
});
const silent = { warn() {} } as never;

async function mint(typ: string, iss = 'https://mcp.example.com'): Promise<string> {
  const [jwk] = (await loadSigningKeys([pem])).privateJwks;
  return new SignJWT({ scope: 'mcp', tid: 'acme' })
    .setProtectedHeader({ alg: 'ES256', kid: jwk!.kid!, typ })
    .setIssuer(iss)
    .setSubject('alice')
    .setAudience('https://mcp.example.com/mcp/hr')
    .setExpirationTime('5m')
    .sign(await importJWK(jwk!, 'ES256'));
}

test('a broker token is the upstream user: iss and userKey of auth.issuer, claims kept', async () => {
  const broker = await prepareBroker(config, silent);
  const verifier = createTokenVerifier(broker!.verifierOptions);
  const principal = await verifier.verify(await mint('at+jwt'));
  assert.equal(principal.iss, 'https://login.example.com');
  assert.equal(principal.userKey, userKeyOf('https://login.example.com', 'alice'));
  assert.equal(principal.claims.tid, 'acme');
  assert.ok(principal.scopes.has('mcp'));
});

test('refused: not typed as an access token, or not issued by publicUrl', async () => {
  const verifier = createTokenVerifier((await prepareBroker(config, silent))!.verifierOptions);
  await assert.rejects(verifier.verify(await mint('JWT')), /typ/);
  await assert.rejects(verifier.verify(await mint('at+jwt', 'https://login.example.com')), /iss/);
});

test('resource-server mode prepares no broker', async () => {
  assert.equal(await prepareBroker({ ...config, auth: { ...config.auth, mode: 'resource-server' } }, silent), undefined);
});
