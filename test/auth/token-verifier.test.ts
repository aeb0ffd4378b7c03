/**
 * Token verification as an OAuth resource server (MCP authorization, "Token Validation";
 * SPEC §2, §5), end to end against REAL OAuth server processes: discovery → jwks_uri →
 * signature, algorithm allowlist, iss, aud, exp/nbf; the verified-token cache; and recovery
 * from an issuer that was down when the verifier first needed it.
 *
 * Tokens are always fetched over HTTP from the OAuth server; nothing here signs a token.
 * (Two negative cases build tokens that carry no valid signature at all: `alg: none`, and
 * a real token whose header was rewritten to name an unknown key.)
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { AuthError } from '../../src/auth/errors.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { createTokenVerifier, type TokenVerifierOptions } from '../../src/auth/token-verifier.js';
import { spawnChild, type ChildHandle } from '../helpers/child.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, unsignedToken, type OAuthHandle } from '../helpers/oauth.js';
import { nodeEntry } from '../helpers/node-entry.js';

const AUDIENCE = 'https://gateway.test/mcp';

let idp: OAuthHandle;
/** A second, independent issuer (own process, own keys). */
let otherIdp: OAuthHandle;

before(async () => {
  [idp, otherIdp] = await Promise.all([startOAuthServer(), startOAuthServer()]);
});
after(async () => {
  await Promise.all([idp?.stop(), otherIdp?.stop()]);
});

function verifierFor(issuer: string, overrides: Partial<TokenVerifierOptions> = {}) {
  return createTokenVerifier({ issuer, audience: AUDIENCE, algorithms: ['RS256', 'ES256'], clockToleranceMs: 30_000, ...overrides });
}

/** Asserts the promise rejects with AuthError invalid_token (401) and returns the error. */
async function rejectsInvalidToken(promise: Promise<unknown>, message?: RegExp): Promise<AuthError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof AuthError, `expected an AuthError, got ${caught === undefined ? 'success' : String(caught)}`);
  assert.equal(caught.code, 'invalid_token', caught.message);
  assert.equal(caught.status, 401);
  if (message) assert.match(caught.message, message);
  return caught;
}

/** Asserts the promise rejects because the issuer's keys cannot be had now: 503, not 401. */
async function rejectsUnavailable(promise: Promise<unknown>, message?: RegExp): Promise<AuthError> {
  const caught = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  assert.ok(caught instanceof AuthError, `expected an AuthError, got ${caught === undefined ? 'success' : String(caught)}`);
  assert.equal(caught.code, 'temporarily_unavailable', caught.message);
  assert.equal(caught.status, 503);
  if (message) assert.match(caught.message, message);
  return caught;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

describe('valid tokens', () => {
  test('a valid token verifies: sub, iss, scopes, exp, claims', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = await idp.token({ sub: 'alice', aud: AUDIENCE, scope: 'mcp tools:read  tools:write', claims: { org: 'acme', groups: ['a', { team: 'b' }] } });
    const principal = await verifier.verify(token);
    assert.equal(principal.sub, 'alice');
    // Frozen all the way down: what is kept by the claims' identity (policy/cel-rules.ts) cannot go stale.
    const groups = principal.claims.groups as [string, { team: string }];
    assert.ok(Object.isFrozen(principal.claims) && Object.isFrozen(groups) && Object.isFrozen(groups[1]));
    assert.throws(() => {
      (groups[1] as { team: string }).team = 'c';
    }, TypeError);
    assert.equal(principal.iss, idp.issuer);
    assert.deepEqual([...principal.scopes].sort(), ['mcp', 'tools:read', 'tools:write']);
    assert.equal(principal.exp, decodeJwt(token).exp);
    assert.ok(principal.exp > nowSeconds());
    assert.equal(principal.claims.org, 'acme');
    assert.equal(principal.userKey, userKeyOf(idp.issuer, 'alice'));
  });

  test('userKey is stable per iss+sub and differs across subjects and issuers', async () => {
    const verifier = verifierFor(idp.issuer);
    const otherVerifier = verifierFor(otherIdp.issuer);
    const [a1, a2, b, otherA] = await Promise.all([
      idp.token({ sub: 'alice', aud: AUDIENCE, scope: 'one' }).then((t) => verifier.verify(t)),
      idp.token({ sub: 'alice', aud: AUDIENCE, scope: 'two', alg: 'ES256' }).then((t) => verifier.verify(t)),
      idp.token({ sub: 'bob', aud: AUDIENCE }).then((t) => verifier.verify(t)),
      otherIdp.token({ sub: 'alice', aud: AUDIENCE }).then((t) => otherVerifier.verify(t)),
    ]);
    assert.equal(a1.userKey, a2.userKey, 'two tokens of the same user give the same userKey');
    assert.notEqual(a1.userKey, b.userKey, 'another subject of the same issuer is another user');
    assert.notEqual(a1.userKey, otherA.userKey, 'the same sub at another issuer is another user');
    assert.equal(otherA.iss, otherIdp.issuer);
    for (const p of [a1, b, otherA]) assert.match(p.userKey, /^[A-Za-z0-9_-]{16,}$/, 'userKey is an opaque, key-safe string');
    // iss+sub concatenation must not collide: ("x", "ab") vs ("xa", "b").
    assert.notEqual(userKeyOf('https://i.example/x', 'ab'), userKeyOf('https://i.example/xa', 'b'));
  });

  test('RS256 and ES256 are both accepted', async () => {
    const verifier = verifierFor(idp.issuer);
    for (const alg of ['RS256', 'ES256'] as const) {
      const token = await idp.token({ sub: `user-${alg}`, aud: AUDIENCE, alg });
      assert.equal(decodeProtectedHeader(token).alg, alg, 'the server signed with the requested algorithm');
      assert.equal((await verifier.verify(token)).sub, `user-${alg}`);
    }
  });

  test('an audience list that contains ours is accepted', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = await idp.token({ sub: 'multi', aud: ['https://other.example/api', AUDIENCE] });
    assert.equal((await verifier.verify(token)).sub, 'multi');
  });

  test('nbf slightly in the future (within the clock tolerance) is accepted', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = await idp.token({ sub: 'skewed', aud: AUDIENCE, claims: { nbf: nowSeconds() + 10 } });
    assert.equal((await verifier.verify(token)).sub, 'skewed');
  });
});

describe('refused tokens → AuthError invalid_token', () => {
  test('wrong audience', async () => {
    const verifier = verifierFor(idp.issuer);
    await rejectsInvalidToken(verifier.verify(await idp.token({ sub: 'alice', aud: 'https://other-resource.example/mcp' })), /aud/);
    await rejectsInvalidToken(verifier.verify(await idp.token({ sub: 'alice', aud: `${AUDIENCE}/github` })), /aud/);
  });

  test('expired (beyond the clock tolerance)', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = await idp.token({ sub: 'alice', aud: AUDIENCE, expiresIn: -120 });
    assert.ok(decodeJwt(token).exp! < nowSeconds() - 60);
    await rejectsInvalidToken(verifier.verify(token), /expired/);
  });

  test('not yet valid (nbf in the future beyond the tolerance)', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = await idp.token({ sub: 'alice', aud: AUDIENCE, claims: { nbf: nowSeconds() + 3600 } });
    await rejectsInvalidToken(verifier.verify(token), /nbf/);
  });

  test('wrong issuer: a token from a second OAuth server process', async () => {
    const verifier = verifierFor(idp.issuer);
    const foreign = await otherIdp.token({ sub: 'alice', aud: AUDIENCE });
    assert.equal(decodeJwt(foreign).iss, otherIdp.issuer);
    await rejectsInvalidToken(verifier.verify(foreign));
    // The same foreign token claiming our issuer is still refused: its signature is not our keys'.
    const forged = await otherIdp.token({ sub: 'alice', aud: AUDIENCE, claims: { iss: idp.issuer } });
    await rejectsInvalidToken(verifier.verify(forged), /signature|key/);
  });

  test('wrong issuer: a correctly signed token whose iss is another issuer', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = await idp.token({ sub: 'alice', aud: AUDIENCE, claims: { iss: 'https://evil.example' } });
    await rejectsInvalidToken(verifier.verify(token), /iss/);
  });

  test('alg none', async () => {
    const verifier = verifierFor(idp.issuer);
    const token = unsignedToken({ iss: idp.issuer, sub: 'alice', aud: AUDIENCE, exp: nowSeconds() + 3600, iat: nowSeconds(), scope: 'mcp' });
    await rejectsInvalidToken(verifier.verify(token));
  });

  test('garbage strings', async () => {
    const verifier = verifierFor(idp.issuer);
    for (const garbage of ['garbage', 'a.b.c', 'eyJhbGciOiJSUzI1NiJ9.e30.', '', '....', 'Bearer x']) {
      await rejectsInvalidToken(verifier.verify(garbage));
    }
  });

  test('a real token with a tampered payload', async () => {
    const verifier = verifierFor(idp.issuer);
    const [header, , signature] = (await idp.token({ sub: 'alice', aud: AUDIENCE })).split('.');
    const payload = Buffer.from(JSON.stringify({ iss: idp.issuer, sub: 'admin', aud: AUDIENCE, exp: nowSeconds() + 3600 })).toString('base64url');
    await rejectsInvalidToken(verifier.verify(`${header}.${payload}.${signature}`), /signature/);
  });

  test('an algorithm outside the allowlist (algorithms [ES256], token RS256)', async () => {
    const verifier = verifierFor(idp.issuer, { algorithms: ['ES256'] });
    const rs = await idp.token({ sub: 'alice', aud: AUDIENCE, alg: 'RS256' });
    assert.equal(decodeProtectedHeader(rs).alg, 'RS256');
    await rejectsInvalidToken(verifier.verify(rs), /algorithm/);
    // …while ES256 passes the same verifier.
    assert.equal((await verifier.verify(await idp.token({ sub: 'alice', aud: AUDIENCE, alg: 'ES256' }))).sub, 'alice');
  });
});

describe('verified-token cache', () => {
  test('a verified token keeps verifying from the cache after the issuer is gone; other tokens fail clearly', async (t) => {
    const issuer = await startOAuthServer({ own: true });
    t.after(() => issuer.stop());
    const verifier = verifierFor(issuer.issuer);
    const token = await issuer.token({ sub: 'cached-user', aud: AUDIENCE, scope: 'mcp' });
    const rotated = await issuer.token({ sub: 'rotated', aud: AUDIENCE });
    const first = await verifier.verify(token);

    await issuer.stop();
    const again = await verifier.verify(token);
    assert.equal(again, first, 'served from the cache (the very same principal object, no re-verification)');
    assert.equal(again.sub, 'cached-user');
    assert.ok(again.scopes.has('mcp'));

    // A token signed by a key the verifier has never seen (as after a key rotation) needs
    // the issuer's JWKS, which cannot be fetched now.
    const [, payload, signature] = rotated.split('.');
    const unknownKid = Buffer.from(JSON.stringify({ ...decodeProtectedHeader(rotated), kid: 'rotated-key-2' })).toString('base64url');
    await rejectsInvalidToken(verifier.verify(`${unknownKid}.${payload}.${signature}`), /unknown key/);

    // A verifier that has not fetched the issuer's keys yet cannot verify anything, and says why.
    const fresh = verifierFor(issuer.issuer);
    const err = await rejectsUnavailable(fresh.verify(rotated), /cannot be verified now/);
    assert.ok(err.message.includes(issuer.issuer), `the message names the issuer: ${err.message}`);
  });

  test('an expired token is not served from the cache', async (t) => {
    // A token valid for 2 s, with no clock tolerance: verified once, then refused after expiry.
    const verifier = verifierFor(idp.issuer, { clockToleranceMs: 0 });
    const token = await idp.token({ sub: 'short-lived', aud: AUDIENCE, expiresIn: 2 });
    assert.equal((await verifier.verify(token)).sub, 'short-lived');
    const exp = decodeJwt(token).exp!;
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, exp * 1000 - Date.now()) + 1_100);
      t.after(() => clearTimeout(timer));
    });
    await rejectsInvalidToken(verifier.verify(token), /expired/);
  });
});

describe('issuer discovery', () => {
  test('a discovery failure is not remembered: the verifier works once the issuer is up', async (t) => {
    // The issuer URL must be known before its server exists, so the OAuth fixture is started
    // directly on a port chosen up front (startOAuthServer() always picks its own port).
    const port = await freePort();
    const issuer = `http://127.0.0.1:${port}`;
    const verifier = verifierFor(issuer);
    const someToken = unsignedToken({ iss: issuer, sub: 'x', aud: AUDIENCE, exp: nowSeconds() + 60 });

    const down = await rejectsUnavailable(verifier.verify(someToken), /cannot be verified now/);
    assert.match(down.message, /discover/);
    // Still failing on a second try (and not hanging), while the issuer is down.
    await rejectsUnavailable(verifier.verify(someToken), /cannot be verified now/);

    const server = await startOAuthFixtureOnPort(port);
    t.after(() => server.stop());
    const token = await fetchToken(issuer, { sub: 'late', aud: AUDIENCE });
    const principal = await verifier.verify(token);
    assert.equal(principal.sub, 'late');
    assert.equal(principal.iss, issuer);
  });

  test('jwksUri overrides discovery', async () => {
    // Pointing at the JWKS directly works even for an issuer URL that serves no discovery document.
    const verifier = createTokenVerifier({
      issuer: idp.issuer,
      audience: AUDIENCE,
      algorithms: ['RS256'],
      clockToleranceMs: 30_000,
      jwksUri: idp.jwksUri,
    });
    assert.equal((await verifier.verify(await idp.token({ sub: 'direct', aud: AUDIENCE }))).sub, 'direct');
    // With the other issuer's JWKS, our issuer's tokens do not verify.
    const wrongKeys = createTokenVerifier({ issuer: idp.issuer, audience: AUDIENCE, algorithms: ['RS256'], clockToleranceMs: 30_000, jwksUri: otherIdp.jwksUri });
    await rejectsInvalidToken(wrongKeys.verify(await idp.token({ sub: 'direct', aud: AUDIENCE })));
  });
});

// ------------------------------------------------------------------------------------------

const FIXTURE = fileURLToPath(new URL('../fixtures/oauth-server-process.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The same fixture startOAuthServer() runs, but on a given port. */
async function startOAuthFixtureOnPort(port: number): Promise<ChildHandle> {
  return spawnChild({
    name: `oauth server :${port}`,
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    cwd: ROOT,
    env: { OAUTH_SERVER_PORT: String(port), OAUTH_SERVER_WATCH_STDIN: '1' },
    stdin: 'pipe',
    readyTimeoutMs: 20_000,
    ready: (line, stream) => stream === 'stdout' && line.includes(`"port":${port}`),
  });
}

async function fetchToken(issuer: string, body: Record<string, unknown>): Promise<string> {
  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(5_000) })).json()) as { token_endpoint: string };
  const res = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', ...body }),
    signal: AbortSignal.timeout(5_000),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { access_token: string }).access_token;
}
