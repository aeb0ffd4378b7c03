/**
 * Provider presets, second half: each provider's token endpoint quirks, against local
 * endpoints that behave the way that provider documents (test/fixtures/provider-
 * imitations.ts). The preset's real URLs are unreachable here, so `tokenUrl` is configured
 * to the imitation (configured values win); what is proven is the quirk handling. Each
 * test also shows the same exchange failing without the preset's quirks where that is the
 * point. Refresh goes through usableToken and a real vault, as the gateway does it.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { exchangeCode, ProviderError, refreshTokens, revokeToken, type ProviderEndpoints, type ProviderTokens } from '../../src/providers/provider-client.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { TokenVault } from '../../src/connect/token-vault.js';
import { usableToken, type RefreshOutcome } from '../../src/connect/usable-token.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { startProviderImitations, type ProviderImitations } from '../fixtures/provider-imitations.js';
import { CLIENT_SECRET, resolveUpstream } from '../helpers/preset-endpoints.js';

const REDIRECT_URI = 'https://mcp.example.com/oauth/callback/acme';
const USER = 'presetUserKeyDigest0123456789';
const VERIFIER = 'v'.repeat(43);

let fx: ProviderImitations;
let store: MemoryStore;
let vault: TokenVault;
let outcomes: RefreshOutcome[];

before(async () => {
  fx = await startProviderImitations();
});
after(async () => {
  await fx?.close();
});
beforeEach(() => {
  store = new MemoryStore();
  vault = new TokenVault(store, createTokenCipher('p'.repeat(32)));
  outcomes = [];
});

/** The preset's endpoints with the token endpoint pointed at the imitation of that provider. */
function preset(name: 'github' | 'google' | 'microsoft' | 'atlassian' | 'slack', extra: Record<string, unknown> = {}): Promise<ProviderEndpoints> {
  return resolveUpstream({ provider: name, preset: name, tokenUrl: fx.tokenUrl(name), scopes: ['read'], ...extra });
}

/** Stores `tokens` as about to expire, then asks for a usable token (which refreshes). */
async function refreshThroughVault(p: ProviderEndpoints, provider: string, tokens: ProviderTokens): Promise<ProviderTokens | undefined> {
  await vault.put(USER, provider, { ...tokens, expiresAt: Date.now() + 1_000 });
  return usableToken({ vault, store, onRefresh: (o) => void outcomes.push(o) }, USER, provider, p);
}

/** Expects a ProviderError whose message and stack show none of `secrets`. */
async function refused(promise: Promise<unknown>, secrets: string[]): Promise<ProviderError> {
  const err = await promise.then(
    () => assert.fail('expected a ProviderError'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ProviderError, String(err));
  for (const s of [...secrets, CLIENT_SECRET]) assert.ok(!String(err.stack).includes(s), `leaks ${s}: ${err.message}`);
  return err;
}

describe('github', () => {
  test('asks for JSON; an OAuth-app token has no refresh token and no expiry, and is used as is', async () => {
    const p = await preset('github');
    const tokens = await exchangeCode(p, { code: 'classic-1', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    assert.equal(fx.hits('/github/token').at(-1)!.headers.accept, 'application/json');
    assert.match(tokens.accessToken, /^gho_/);
    assert.equal(tokens.refreshToken, undefined);
    assert.equal(tokens.expiresAt, undefined);
    assert.equal(tokens.scope, 'repo,gist');
    await vault.put(USER, 'github', tokens);
    const before = fx.hits('/github/token').length;
    assert.deepEqual(await usableToken({ vault, store }, USER, 'github', p), tokens);
    assert.equal(fx.hits('/github/token').length, before, 'nothing to refresh, nothing sent');
  });

  test('a form-encoded answer is read too (success and a 200 error)', async () => {
    const p = await preset('github', { tokenUrl: fx.tokenUrl('github-form') });
    const tokens = await exchangeCode(p, { code: 'expiring-1', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    assert.match(tokens.accessToken, /^ghu_/);
    assert.match(tokens.refreshToken!, /^ghr_/);
    assert.ok(tokens.expiresAt! > Date.now() + 28_000_000, 'expires_in arrives as a string in a form body');
    const err = await refused(exchangeCode(p, { code: 'wrong-code-SECRET', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER }), ['wrong-code-SECRET']);
    assert.equal(err.status, 200);
    assert.equal(err.oauthError, 'invalid_grant');
    assert.match(err.message, /\[bad_verification_code\]/);
  });

  test('expiring tokens rotate; bad_refresh_token (HTTP 200) unlinks the account', async () => {
    const p = await preset('github');
    const first = await exchangeCode(p, { code: 'expiring-2', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    const second = await refreshThroughVault(p, 'github', first);
    assert.match(second!.accessToken, /^ghu_/);
    assert.notEqual(second!.refreshToken, first.refreshToken);
    // The old refresh token was spent: GitHub answers 200 with error=bad_refresh_token.
    assert.equal(await refreshThroughVault(p, 'github', first), undefined);
    assert.deepEqual(outcomes, ['ok', 'invalid_grant']);
    assert.equal(await vault.get(USER, 'github'), undefined, 'the dead link is removed, so the user is asked to link again');
    // Without the preset's error code mapping the same answer would keep failing every call.
    const plain = await refused(refreshTokens({ ...p, quirks: undefined }, first.refreshToken!), [first.refreshToken!]);
    assert.equal(plain.oauthError, 'bad_refresh_token');
  });

  test('no RFC 7009 revocation: Disconnect revokes nothing', async () => {
    const p = await preset('github');
    assert.equal(await revokeToken(p, 'gho_x', 'access_token'), false);
  });
});

describe('google', () => {
  test('a refresh answer without refresh_token keeps the old one in the vault, and it keeps working', async () => {
    const p = await preset('google', { revocationUrl: `${fx.origin}/google/revoke` });
    const first = await exchangeCode(p, { code: 'g-code', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    assert.ok(first.refreshToken);
    const second = await refreshThroughVault(p, 'google', first);
    assert.match(second!.accessToken, /^ya29\.refreshed-/);
    assert.equal(second!.refreshToken, first.refreshToken);
    assert.equal((await vault.get(USER, 'google'))!.refreshToken, first.refreshToken, 'stored with the old refresh token');
    const third = await refreshThroughVault(p, 'google', (await vault.get(USER, 'google'))!);
    assert.notEqual(third!.accessToken, second!.accessToken);
    assert.equal(fx.hits('/google/token').at(-1)!.form.get('refresh_token'), first.refreshToken);
    assert.equal(await revokeToken(p, third!.refreshToken!, 'refresh_token'), true);
  });
});

describe('microsoft', () => {
  test('no resource on exchange or refresh even when one is set; scope sent on refresh; refresh tokens rotate', async () => {
    const p = { ...(await preset('microsoft', { scopes: ['api://switchboard-api/.default'] })), resource: 'https://mcp.example.com/mcp' };
    const tokens = await exchangeCode(p, { code: 'ms-code', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    assert.match(tokens.accessToken, /^eyJ\.ms-/);
    assert.equal(fx.hits('/microsoft/token').at(-1)!.form.has('resource'), false);

    const refreshed = await refreshThroughVault(p, 'microsoft', tokens);
    const sent = fx.hits('/microsoft/token').at(-1)!.form;
    assert.equal(sent.get('scope'), 'api://switchboard-api/.default offline_access');
    assert.equal(sent.has('resource'), false);
    assert.notEqual(refreshed!.refreshToken, tokens.refreshToken, 'the rotated refresh token is stored');
    assert.equal((await vault.get(USER, 'microsoft'))!.refreshToken, refreshed!.refreshToken);

    // Without the preset the same endpoint refuses both requests: the quirks are what make it work.
    const plain: ProviderEndpoints = { ...p, quirks: undefined };
    const withResource = await refused(exchangeCode(plain, { code: 'ms-code', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER }), ['ms-code']);
    assert.match(withResource.message, /AADSTS901002/);
    const noScope = await refused(refreshTokens({ ...plain, resource: undefined }, refreshed!.refreshToken!), [refreshed!.refreshToken!]);
    assert.match(noScope.message, /AADSTS900144/);
  });
});

describe('atlassian', () => {
  test('client id and secret in the body (no Basic); rotating refresh tokens; a spent one unlinks', async () => {
    const p = await preset('atlassian', { scopes: ['read:jira-work'] });
    const first = await exchangeCode(p, { code: 'atl-code', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    const sent = fx.hits('/atlassian/token').at(-1)!;
    assert.equal(sent.headers.authorization, undefined);
    assert.equal(sent.form.get('client_id'), 'sb-client');
    assert.equal(sent.form.get('client_secret'), CLIENT_SECRET);
    const second = await refreshThroughVault(p, 'atlassian', first);
    assert.notEqual(second!.refreshToken, first.refreshToken);
    const third = await refreshThroughVault(p, 'atlassian', second!);
    assert.notEqual(third!.refreshToken, second!.refreshToken, 'the rotated token works once more');
    assert.equal(await refreshThroughVault(p, 'atlassian', first), undefined, 'a spent refresh token → 403 invalid_grant → unlinked');
    assert.deepEqual(outcomes, ['ok', 'ok', 'invalid_grant']);
    // With the default client_secret_basic the imitation (like the documented endpoint) refuses.
    const basic = await refused(exchangeCode({ ...p, quirks: undefined }, { code: 'atl-code', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER }), ['atl-code']);
    assert.equal(basic.oauthError, 'access_denied');
  });
});

describe('slack', () => {
  test('the user token under authed_user is the one kept; the bot token beside it is not', async () => {
    const p = await preset('slack', { scopes: ['channels:history', 'chat:write'] });
    const tokens = await exchangeCode(p, { code: 'good', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    assert.match(tokens.accessToken, /^xoxe\.xoxp-/);
    assert.match(tokens.refreshToken!, /^xoxe-1-r/);
    assert.equal(tokens.tokenType, 'user');
    assert.equal(tokens.scope, 'channels:history,chat:write');
    assert.ok(tokens.expiresAt! > Date.now() + 43_000_000);
    assert.ok(!JSON.stringify(tokens).includes('xoxb'), 'no bot token');
    // Read at the top level, the same answer would have given the bot token.
    const plain = await exchangeCode({ ...p, quirks: undefined }, { code: 'good', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    assert.match(plain.accessToken, /^xoxe\.xoxb-bot/);
  });

  test('errors come as HTTP 200 {ok: false}: invalid_code, and ok:false without an error member', async () => {
    const p = await preset('slack');
    const err = await refused(exchangeCode(p, { code: 'slack-code-SECRET', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER }), ['slack-code-SECRET', VERIFIER]);
    assert.equal(err.kind, 'oauth');
    assert.equal(err.status, 200);
    assert.equal(err.oauthError, 'invalid_grant');
    assert.match(err.message, /\[invalid_code\]/);
    const bare = await refused(exchangeCode(p, { code: 'no-error', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER }), []);
    assert.equal(bare.kind, 'bad_response');
    assert.match(bare.message, /answered HTTP 200 without an OAuth error/, 'refused for ok:false, not read as tokens');
  });

  test('refresh answers at the top level and rotates; invalid_refresh_token unlinks', async () => {
    const p = await preset('slack');
    const first = await exchangeCode(p, { code: 'good', redirectUri: REDIRECT_URI, codeVerifier: VERIFIER });
    const second = await refreshThroughVault(p, 'slack', first);
    assert.match(second!.accessToken, /^xoxe\.xoxp-/);
    assert.notEqual(second!.refreshToken, first.refreshToken);
    assert.equal(await refreshThroughVault(p, 'slack', first), undefined);
    assert.deepEqual(outcomes, ['ok', 'invalid_grant']);
    assert.equal(await vault.get(USER, 'slack'), undefined);
  });
});
