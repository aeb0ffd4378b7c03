/**
 * The third-party OAuth client (SPEC §4) against a REAL OAuth server process
 * (oauth2-mock-server, test/fixtures/oauth-server-process.ts) acting as the provider, plus
 * tiny node:http token endpoints for what the mock cannot do (it accepts any refresh token,
 * so `invalid_grant` comes from a fixture; likewise form-encoded answers, hangs, redirects).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  authorizationRequestUrl,
  createPkce,
  exchangeCode,
  ProviderError,
  refreshTokens,
  revokeToken,
  type ProviderEndpoints,
} from '../../src/providers/provider-client.js';
import { guardedFetch } from '../../src/providers/safe-fetch.js';
import { hold, sendForm, sendJson, startHttpFixture, type HttpFixture } from '../fixtures/provider-http-fixture.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

const REDIRECT_URI = 'http://127.0.0.1:9/oauth/callback';

/** Runs `fn`, expects a ProviderError, and checks that no secret shows in it. */
async function providerError(fn: () => Promise<unknown>, secrets: string[] = []): Promise<ProviderError> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof ProviderError, `expected ProviderError, got ${String(err)}`);
    for (const s of secrets) {
      assert.ok(!err.message.includes(s), `error message leaks a secret: ${err.message}`);
      assert.ok(!String(err.stack).includes(s), 'stack leaks a secret');
    }
    return err;
  }
  assert.fail('expected a ProviderError');
}

/** Authorizes at the provider (no login UI: it redirects straight back) and returns the code. */
async function authorize(p: ProviderEndpoints, challenge: string, state = 'st-123'): Promise<string> {
  const res = await fetch(authorizationRequestUrl(p, { redirectUri: REDIRECT_URI, state, codeChallenge: challenge }), {
    redirect: 'manual',
    signal: AbortSignal.timeout(5_000),
  });
  assert.equal(res.status, 302);
  const location = new URL(res.headers.get('location')!);
  assert.equal(`${location.origin}${location.pathname}`, REDIRECT_URI);
  assert.equal(location.searchParams.get('state'), state);
  const code = location.searchParams.get('code');
  assert.ok(code, 'authorization code in the redirect');
  return code;
}

describe('provider client against a real OAuth server', () => {
  let oauth: OAuthHandle;
  let provider: ProviderEndpoints;

  before(async () => {
    oauth = await startOAuthServer();
    provider = {
      authorizationUrl: `${oauth.issuer}/authorize`,
      tokenUrl: oauth.tokenEndpoint,
      revocationUrl: `${oauth.issuer}/revoke`,
      clientId: 'switchboard-test',
      scopes: ['openid', 'repo'],
    };
  });
  after(async () => {
    await oauth?.stop();
  });

  test('createPkce: 32 random bytes, S256 challenge (RFC 7636)', () => {
    const a = createPkce();
    const b = createPkce();
    assert.match(a.verifier, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(a.verifier, b.verifier);
    assert.equal(a.challenge, createHash('sha256').update(a.verifier).digest('base64url'));
  });

  test('authorizationRequestUrl: all parameters, existing query kept, resource when set, scope omitted when empty', () => {
    const url = new URL(
      authorizationRequestUrl(
        { ...provider, authorizationUrl: 'https://idp.example/authorize?prompt=consent&audience=x', resource: 'https://mcp.example/mcp' },
        { redirectUri: REDIRECT_URI, state: 's t', codeChallenge: 'chal' },
      ),
    );
    const q = url.searchParams;
    assert.equal(q.get('prompt'), 'consent');
    assert.equal(q.get('audience'), 'x');
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('client_id'), 'switchboard-test');
    assert.equal(q.get('redirect_uri'), REDIRECT_URI);
    assert.equal(q.get('scope'), 'openid repo');
    assert.equal(q.get('state'), 's t');
    assert.equal(q.get('code_challenge'), 'chal');
    assert.equal(q.get('code_challenge_method'), 'S256');
    assert.equal(q.get('resource'), 'https://mcp.example/mcp');
    const bare = new URL(authorizationRequestUrl({ ...provider, scopes: [] }, { redirectUri: REDIRECT_URI, state: 's', codeChallenge: 'c' }));
    assert.equal(bare.searchParams.has('scope'), false);
    assert.equal(bare.searchParams.has('resource'), false);
  });

  test('code exchange with PKCE, then refresh', async () => {
    const pkce = createPkce();
    const code = await authorize(provider, pkce.challenge);
    const before = Date.now();
    const tokens = await exchangeCode(provider, { code, redirectUri: REDIRECT_URI, codeVerifier: pkce.verifier });
    assert.equal(tokens.accessToken.split('.').length, 3, 'the mock issues JWT access tokens');
    assert.equal(tokens.tokenType, 'Bearer');
    assert.ok(tokens.refreshToken);
    assert.ok(tokens.expiresAt! >= before + 3_599_000 && tokens.expiresAt! <= Date.now() + 3_600_000, 'expires_in → expiresAt');
    assert.equal(typeof tokens.scope, 'string');

    const refreshed = await refreshTokens(provider, tokens.refreshToken!);
    // (Same claims within the same second give the same JWT: compare the refresh tokens instead.)
    assert.equal(refreshed.accessToken.split('.').length, 3);
    assert.ok(refreshed.refreshToken, 'the mock rotates refresh tokens');
    assert.notEqual(refreshed.refreshToken, tokens.refreshToken);
    assert.ok(refreshed.expiresAt! > Date.now());
  });

  test('a code used twice, a bad code, or a wrong verifier → ProviderError oauth with the server error code', async () => {
    const pkce = createPkce();
    const code = await authorize(provider, pkce.challenge);
    await exchangeCode(provider, { code, redirectUri: REDIRECT_URI, codeVerifier: pkce.verifier });
    // oauth2-mock-server answers these with 400 invalid_request (not invalid_grant).
    const replay = await providerError(() => exchangeCode(provider, { code, redirectUri: REDIRECT_URI, codeVerifier: pkce.verifier }), [code, pkce.verifier]);
    assert.equal(replay.kind, 'oauth');
    assert.equal(replay.oauthError, 'invalid_request');
    assert.equal(replay.status, 400);

    const bad = await providerError(() => exchangeCode(provider, { code: 'not-a-code-0000', redirectUri: REDIRECT_URI, codeVerifier: pkce.verifier }), ['not-a-code-0000']);
    assert.equal(bad.kind, 'oauth');
    assert.equal(bad.oauthError, 'invalid_request');

    const other = createPkce();
    const code2 = await authorize(provider, other.challenge);
    const wrong = await providerError(() => exchangeCode(provider, { code: code2, redirectUri: REDIRECT_URI, codeVerifier: pkce.verifier }), [code2, pkce.verifier]);
    assert.equal(wrong.oauthError, 'invalid_request');
  });

  test('revocation at the provider (RFC 7009); false without a revocation endpoint', async () => {
    assert.equal(await revokeToken(provider, 'some-refresh-token', 'refresh_token'), true);
    assert.equal(await revokeToken({ ...provider, revocationUrl: undefined }, 'x', 'access_token'), false);
  });
});

describe('provider client against fixture endpoints', () => {
  let fx: HttpFixture;
  let base: ProviderEndpoints;
  const REFRESH = 'rt-secret-refresh-token-value';

  before(async () => {
    fx = await startHttpFixture((req, res) => {
      switch (req.path) {
        case '/token-invalid-grant':
          return sendJson(res, 400, { error: 'invalid_grant', error_description: `refresh token ${req.form.get('refresh_token')} was revoked` });
        case '/token-form':
          return sendForm(res, 200, { access_token: 'gho_formEncodedAccess', token_type: 'bearer', scope: 'repo,gist', expires_in: '28800' });
        case '/token-form-error':
          // GitHub answers errors with 200 and an `error` member.
          return sendForm(res, 200, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
        case '/token-no-rotation':
          return sendJson(res, 200, { access_token: 'at-new', token_type: 'Bearer', expires_in: 60 });
        case '/token-echo':
          return sendJson(res, 200, { access_token: 'at-echo', token_type: 'Bearer' });
        case '/token-hang':
          return hold(res);
        case '/token-redirect':
          res.writeHead(302, { location: 'http://127.0.0.1:9/elsewhere' }).end();
          return;
        case '/token-500':
          res.writeHead(500, { 'content-type': 'text/html' }).end('<h1>oops</h1>');
          return;
        case '/token-huge':
          return sendJson(res, 200, { access_token: 'x'.repeat(300_000), token_type: 'Bearer' });
        case '/token-echo-secret':
          return sendJson(res, 401, { error: 'invalid_client', error_description: `client ${req.form.get('client_id')} with secret ${req.form.get('client_secret')} is unknown` });
        case '/revoke':
          res.writeHead(200).end();
          return;
        case '/revoke-unsupported':
          return sendJson(res, 400, { error: 'unsupported_token_type' });
      }
    });
    base = { authorizationUrl: `${fx.origin}/authorize`, tokenUrl: `${fx.origin}/token-echo`, clientId: 'public-client', scopes: ['repo'] };
  });
  after(async () => {
    await fx?.close();
  });

  test('a refresh token the provider rejects → ProviderError oauth invalid_grant, without the token in the message', async () => {
    const err = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-invalid-grant` }, REFRESH), [REFRESH]);
    assert.equal(err.kind, 'oauth');
    assert.equal(err.oauthError, 'invalid_grant');
    assert.equal(err.status, 400);
    assert.match(err.message, /\[redacted\]/, 'the description is kept, with our token removed');
  });

  test('form-encoded token responses (GitHub style), success and error', async () => {
    const started = Date.now();
    const tokens = await exchangeCode({ ...base, tokenUrl: `${fx.origin}/token-form` }, { code: 'c0de', redirectUri: REDIRECT_URI, codeVerifier: 'v'.repeat(43) });
    assert.equal(tokens.accessToken, 'gho_formEncodedAccess');
    assert.equal(tokens.tokenType, 'bearer');
    assert.equal(tokens.scope, 'repo,gist');
    assert.ok(tokens.expiresAt! >= started + 28_800_000 && tokens.expiresAt! <= Date.now() + 28_800_000);
    assert.equal(tokens.refreshToken, undefined);

    const err = await providerError(() => exchangeCode({ ...base, tokenUrl: `${fx.origin}/token-form-error` }, { code: 'c0de-secret', redirectUri: REDIRECT_URI, codeVerifier: 'v'.repeat(43) }), ['c0de-secret']);
    assert.equal(err.kind, 'oauth');
    assert.equal(err.oauthError, 'bad_verification_code');
    assert.equal(err.status, 200);
  });

  test('refresh keeps the old refresh token when the provider does not rotate it', async () => {
    const tokens = await refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-no-rotation` }, REFRESH);
    assert.equal(tokens.accessToken, 'at-new');
    assert.equal(tokens.refreshToken, REFRESH);
    assert.equal(tokens.scope, undefined, 'scope only when the provider says');
  });

  test('client authentication: public client in the body; client_secret_basic with form-urlencoded id and secret (RFC 6749 §2.3.1)', async () => {
    await exchangeCode({ ...base, resource: 'https://mcp.example/mcp' }, { code: 'code-1', redirectUri: REDIRECT_URI, codeVerifier: 'ver-1' });
    let req = fx.hits('/token-echo').at(-1)!;
    assert.equal(req.headers.authorization, undefined);
    assert.equal(req.form.get('client_id'), 'public-client');
    assert.equal(req.form.get('grant_type'), 'authorization_code');
    assert.equal(req.form.get('code'), 'code-1');
    assert.equal(req.form.get('redirect_uri'), REDIRECT_URI);
    assert.equal(req.form.get('code_verifier'), 'ver-1');
    assert.equal(req.form.get('resource'), 'https://mcp.example/mcp');
    assert.equal(req.headers.accept, 'application/json');

    await refreshTokens({ ...base, clientId: 'my client:1', clientSecret: 'p@ss word/+' }, REFRESH);
    req = fx.hits('/token-echo').at(-1)!;
    const expected = `Basic ${Buffer.from('my+client%3A1:p%40ss+word%2F%2B').toString('base64')}`;
    assert.equal(req.headers.authorization, expected);
    assert.equal(req.form.has('client_id'), false);
    assert.equal(req.form.get('grant_type'), 'refresh_token');
    assert.equal(req.form.get('refresh_token'), REFRESH);
    assert.equal(req.form.has('scope'), false);
  });

  test('client_secret_post (a preset quirk): id and secret in the body, no Basic; a provider echoing the secret is redacted', async () => {
    const secret = 'post-secret-value-1';
    const p: ProviderEndpoints = { ...base, clientSecret: secret, quirks: { clientAuthentication: 'client_secret_post' } };
    await refreshTokens(p, REFRESH);
    const req = fx.hits('/token-echo').at(-1)!;
    assert.equal(req.headers.authorization, undefined);
    assert.equal(req.form.get('client_id'), 'public-client');
    assert.equal(req.form.get('client_secret'), secret);
    const err = await providerError(() => refreshTokens({ ...p, tokenUrl: `${fx.origin}/token-echo-secret` }, REFRESH), [secret, REFRESH]);
    assert.equal(err.oauthError, 'invalid_client');
    assert.match(err.message, /with secret \[redacted\] is unknown/);
  });

  test('token endpoint down (refused port) → network', async () => {
    const port = await freePort();
    const err = await providerError(() => refreshTokens({ ...base, tokenUrl: `http://127.0.0.1:${port}/token` }, REFRESH), [REFRESH]);
    assert.equal(err.kind, 'network');
    assert.match(err.message, /ECONNREFUSED/);
  });

  test('a hanging token endpoint → timeout', async () => {
    const started = Date.now();
    const err = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-hang` }, REFRESH, { timeoutMs: 300 }), [REFRESH]);
    assert.equal(err.kind, 'timeout');
    assert.ok(Date.now() - started < 5_000);
  });

  test('redirects are not followed; non-OAuth errors and oversized bodies are bad responses', async () => {
    const redirect = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-redirect` }, REFRESH));
    assert.equal(redirect.kind, 'bad_response');
    assert.equal(redirect.status, 302);
    assert.equal(fx.hits('/elsewhere').length, 0);
    const html = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-500` }, REFRESH));
    assert.equal(html.kind, 'bad_response');
    assert.equal(html.status, 500);
    const huge = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-huge` }, REFRESH));
    assert.equal(huge.kind, 'bad_response');
  });

  test('with the SSRF-guarded fetch (discovered endpoints): works on allowed hosts, refusals map to ProviderError kinds', async () => {
    const loopback = guardedFetch({ allowLoopback: true });
    const tokens = await refreshTokens(base, REFRESH, { fetch: loopback });
    assert.equal(tokens.accessToken, 'at-echo');
    assert.equal(fx.hits('/token-echo').at(-1)!.form.get('refresh_token'), REFRESH);
    const redirect = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-redirect` }, REFRESH, { fetch: loopback }));
    assert.equal(redirect.kind, 'bad_response');
    const slow = await providerError(() => refreshTokens({ ...base, tokenUrl: `${fx.origin}/token-hang` }, REFRESH, { fetch: loopback, timeoutMs: 300 }));
    assert.equal(slow.kind, 'timeout');
    const strict = await providerError(() => refreshTokens(base, REFRESH, { fetch: guardedFetch() }), [REFRESH]);
    assert.equal(strict.kind, 'network', 'loopback not allowed: refused before connecting');
    const metadata = await providerError(() => refreshTokens({ ...base, tokenUrl: 'https://169.254.169.254/token' }, REFRESH, { fetch: guardedFetch() }));
    assert.equal(metadata.kind, 'network');
    assert.match(metadata.message, /SSRF/);
  });

  test('revocation sends token and hint with client authentication; an OAuth error is thrown', async () => {
    assert.equal(await revokeToken({ ...base, revocationUrl: `${fx.origin}/revoke`, clientSecret: 's3cret' }, 'tok-to-revoke', 'refresh_token'), true);
    const req = fx.hits('/revoke').at(-1)!;
    assert.equal(req.form.get('token'), 'tok-to-revoke');
    assert.equal(req.form.get('token_type_hint'), 'refresh_token');
    assert.ok(req.headers.authorization?.startsWith('Basic '));
    const err = await providerError(() => revokeToken({ ...base, revocationUrl: `${fx.origin}/revoke-unsupported` }, 'tok-x-secret', 'access_token'), ['tok-x-secret']);
    assert.equal(err.oauthError, 'unsupported_token_type');
  });
});
