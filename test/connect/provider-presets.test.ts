/**
 * Provider presets (SPEC §3 `upstreamAuth.preset`), first half: what a preset fills in
 * (through the real config parser and endpoint resolver, as the gateway does it), that
 * configured values win, and the authorization request each provider needs. The token
 * endpoint quirks are in provider-presets-tokens.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { authorizationRequestUrl, type ProviderEndpoints } from '../../src/providers/provider-client.js';
import { PRESETS } from '../../src/providers/provider-presets.js';
import { resolveUpstream as resolve } from '../helpers/preset-endpoints.js';

const REDIRECT_URI = 'https://mcp.example.com/oauth/callback/acme';

function authorizeQuery(p: ProviderEndpoints): URLSearchParams {
  return new URL(authorizationRequestUrl(p, { redirectUri: REDIRECT_URI, state: 'st', codeChallenge: 'ch' })).searchParams;
}

describe('presets fill the endpoints; configured values win', () => {
  test('each preset fills the provider documented endpoints, clientId and secret from config', async () => {
    const expected = {
      github: ['https://github.com/login/oauth/authorize', 'https://github.com/login/oauth/access_token', undefined],
      google: ['https://accounts.google.com/o/oauth2/v2/auth', 'https://oauth2.googleapis.com/token', 'https://oauth2.googleapis.com/revoke'],
      microsoft: ['https://login.microsoftonline.com/common/oauth2/v2.0/authorize', 'https://login.microsoftonline.com/common/oauth2/v2.0/token', undefined],
      atlassian: ['https://auth.atlassian.com/authorize', 'https://auth.atlassian.com/oauth/token', undefined],
      slack: ['https://slack.com/oauth/v2/authorize', 'https://slack.com/api/oauth.v2.access', undefined],
    } as const;
    assert.deepEqual(Object.keys(expected).sort(), Object.keys(PRESETS).sort());
    for (const [preset, [authorizationUrl, tokenUrl, revocationUrl]] of Object.entries(expected)) {
      const p = await resolve({ provider: preset, preset, scopes: ['read'] });
      assert.equal(p.authorizationUrl, authorizationUrl, preset);
      assert.equal(p.tokenUrl, tokenUrl, preset);
      assert.equal(p.revocationUrl, revocationUrl, `${preset}: RFC 7009 revocation only where the provider has it`);
      assert.equal(p.clientId, 'sb-client');
      assert.equal(p.clientSecret, 'sb-secret-value');
      assert.deepEqual(p.quirks, PRESETS[preset as keyof typeof PRESETS].quirks);
    }
  });

  test('configured URLs override the preset; the quirks stay', async () => {
    const p = await resolve({
      provider: 'gh',
      preset: 'github',
      authorizationUrl: 'http://127.0.0.1:9/authorize',
      tokenUrl: 'http://127.0.0.1:9/token',
      revocationUrl: 'http://127.0.0.1:9/revoke',
    });
    assert.equal(p.authorizationUrl, 'http://127.0.0.1:9/authorize');
    assert.equal(p.tokenUrl, 'http://127.0.0.1:9/token');
    assert.equal(p.revocationUrl, 'http://127.0.0.1:9/revoke');
    assert.equal(p.quirks?.errorCodes?.bad_refresh_token, 'invalid_grant');
  });

  test('without a preset nothing is added (standard OAuth 2.1)', async () => {
    const p = await resolve({ provider: 'acme', authorizationUrl: 'https://acme.example/authorize', tokenUrl: 'https://acme.example/token', scopes: ['a'], resource: 'https://mcp.acme.example/' });
    assert.equal(p.quirks, undefined);
    assert.deepEqual(p.scopes, ['a']);
    assert.equal(p.resource, 'https://mcp.acme.example/');
  });

  test('microsoft: the tenant goes into both endpoint paths (upstreamAuth.tenant, default common)', async () => {
    const p = await resolve({ provider: 'entra', preset: 'microsoft', tenant: 'contoso.onmicrosoft.com', scopes: ['User.Read'] });
    assert.equal(p.authorizationUrl, 'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize');
    assert.equal(p.tokenUrl, 'https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token');
  });
});

describe('the authorization request each provider needs', () => {
  test('github: scopes space-separated in `scope`, nothing else added', async () => {
    const q = authorizeQuery(await resolve({ provider: 'gh', preset: 'github', scopes: ['repo', 'read:org'] }));
    assert.equal(q.get('scope'), 'repo read:org');
    for (const extra of ['access_type', 'prompt', 'audience', 'user_scope', 'resource']) assert.equal(q.has(extra), false, extra);
  });

  test('google: access_type=offline and prompt=consent (else no refresh token); a configured prompt wins', async () => {
    const q = authorizeQuery(await resolve({ provider: 'google', preset: 'google', scopes: ['openid', 'https://www.googleapis.com/auth/drive.readonly'] }));
    assert.equal(q.get('access_type'), 'offline');
    assert.equal(q.get('prompt'), 'consent');
    assert.equal(q.get('scope'), 'openid https://www.googleapis.com/auth/drive.readonly');
    assert.equal(q.get('code_challenge_method'), 'S256');
    const own = authorizeQuery(await resolve({ provider: 'google', preset: 'google', authorizationUrl: 'http://127.0.0.1:9/auth?prompt=select_account+consent', scopes: ['openid'] }));
    assert.equal(own.get('prompt'), 'select_account consent');
    assert.equal(own.get('access_type'), 'offline');
  });

  test('microsoft: offline_access added once, and no RFC 8707 resource even when one is set (as discovery would)', async () => {
    const p = await resolve({ provider: 'entra', preset: 'microsoft', scopes: ['api://switchboard-api/.default'] });
    assert.deepEqual(p.scopes, ['api://switchboard-api/.default', 'offline_access']);
    const q = authorizeQuery({ ...p, resource: 'https://mcp.example.com/mcp' });
    assert.equal(q.get('scope'), 'api://switchboard-api/.default offline_access');
    assert.equal(q.has('resource'), false);
    const already = await resolve({ provider: 'entra', preset: 'microsoft', scopes: ['offline_access', 'User.Read'] });
    assert.deepEqual(already.scopes, ['offline_access', 'User.Read']);
  });

  test('atlassian: audience=api.atlassian.com, prompt=consent, offline_access added', async () => {
    const q = authorizeQuery(await resolve({ provider: 'jira', preset: 'atlassian', scopes: ['read:jira-work'] }));
    assert.equal(q.get('audience'), 'api.atlassian.com');
    assert.equal(q.get('prompt'), 'consent');
    assert.equal(q.get('scope'), 'read:jira-work offline_access');
  });

  test('slack: user scopes in `user_scope`, comma-separated, and no `scope` of ours', async () => {
    const q = authorizeQuery(await resolve({ provider: 'slack', preset: 'slack', scopes: ['channels:history', 'chat:write'] }));
    assert.equal(q.get('user_scope'), 'channels:history,chat:write');
    assert.equal(q.has('scope'), false);
    // A bot scope the operator put in the URL is left alone.
    const bot = authorizeQuery(await resolve({ provider: 'slack', preset: 'slack', authorizationUrl: 'http://127.0.0.1:9/oauth/v2/authorize?scope=commands', scopes: ['chat:write'] }));
    assert.equal(bot.get('scope'), 'commands');
    assert.equal(bot.get('user_scope'), 'chat:write');
  });
});
