/**
 * The gateway linking an account at a discovered authorization server, as a 2026-07-28 client
 * must (issue 42 §5 and §7), end to end: a real gateway on Redis, the MCP authorization server
 * for its own users (oauth2-mock-server), two discovered authorization servers on a small HTTP
 * fixture (test/fixtures/discovered-provider.ts: RFC 9728, RFC 8414, RFC 7591, the code grant
 * with PKCE) and Chromium pressing Connect on /connections.
 *
 * - §5: the registration says its `application_type` (SEP-837); the gateway here runs on
 *   `http://127.0.0.1`, a loopback redirect URI, so `native` (an https gateway is `web`: the
 *   unit test in upstream-discovery.test.ts).
 * - §7: `offline_access` is asked for where the authorization server lists it in its own
 *   `scopes_supported` (SEP-2207) — the backend's PRM never does —, and not where it does not.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { userKeyOf } from '../../src/auth/principal.js';
import { startDiscoveredProvider, type DiscoveredProvider } from '../fixtures/discovered-provider.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { openSharedVault, type SharedVault } from '../helpers/vault.js';

const PREFIX = 'reg2026:';
const TOKEN_KEY = 'reg2026-token-key-0123456789abcdef0123456789';
const COOKIE_KEY = 'reg2026-cookie-key-0123456789abcdef012345678';
const TIMEOUT_MS = 90_000;

let redis: RedisHandle;
let idp: OAuthHandle;
let browser: BrowserHandle;
let discovered: DiscoveredProvider;
let gateway: GatewayHandle;
let shared: SharedVault;

before(async () => {
  [redis, idp, browser, discovered] = await Promise.all([
    startRedis(),
    startOAuthServer(),
    launchBrowser(),
    startDiscoveredProvider({
      offline: { scopes: ['files:read'], asScopes: ['files:read', 'files:write', 'offline_access'], issParameter: true },
      online: { scopes: ['files:read', 'files:write'], issParameter: true },
    }),
  ]);
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    redisUrl: redis.url,
    backends: [
      { name: 'offline-tools', url: discovered.backendUrl('offline'), upstreamAuth: { provider: 'offline', discover: true } },
      { name: 'online-tools', url: discovered.backendUrl('online'), upstreamAuth: { provider: 'online', discover: true } },
    ],
    overrides: {
      redis: { url: redis.url, keyPrefix: PREFIX },
      secrets: { cookieKey: COOKIE_KEY, tokenKey: TOKEN_KEY },
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
  shared = openSharedVault(redis.url, PREFIX, TOKEN_KEY);
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  shared?.close();
  await Promise.allSettled([idp?.stop(), redis?.stop(), discovered?.close()]);
});

/** Signs `sub` in on /connections and presses Connect for `provider` in Chromium; the link completes. */
async function link(sub: string, provider: string): Promise<void> {
  const context = await browser.newContext();
  try {
    await context.addCookies([idp.subjectCookie(sub)]);
    const page = await context.newPage();
    assert.equal((await page.goto(`${gateway.url}/connections`))?.status(), 200);
    const [callback] = await Promise.all([
      page.waitForResponse((r) => r.url().startsWith(`${gateway.url}/oauth/callback/${provider}?`)),
      page.getByRole('button', { name: `Connect ${provider}`, exact: true }).click(),
    ]);
    assert.equal(callback.status(), 303, `${provider}: the callback sends the browser back to /connections`);
    const tokens = await shared.vault.get(userKeyOf(idp.issuer, sub), provider);
    assert.equal(tokens?.accessToken, discovered.issuedTokens(provider).at(-1), `${provider}: the link is stored`);
  } finally {
    await context.close();
  }
}

test('registration says application_type (SEP-837): native for a gateway on a loopback address', { timeout: TIMEOUT_MS }, async () => {
  await link('ada', 'offline');
  const [registration, ...more] = discovered.registrations('offline');
  assert.equal(more.length, 0, 'one registration');
  assert.deepEqual(registration!.redirect_uris, [`${gateway.url}/oauth/callback/offline`]);
  assert.equal(registration!.application_type, 'native', `the body the authorization server received: ${JSON.stringify(registration)}`);
  assert.deepEqual(registration!.grant_types, ['authorization_code', 'refresh_token']);
});

test('offline_access is asked for where the authorization server lists it, and only there (SEP-2207)', { timeout: TIMEOUT_MS }, async () => {
  await link('bea', 'offline');
  await link('bea', 'online');
  assert.equal(discovered.authorizationScopes('offline').at(-1), 'files:read offline_access', 'the PRM scope, and offline_access from the AS metadata');
  assert.equal(discovered.authorizationScopes('online').at(-1), 'files:read files:write', 'no offline_access where the AS does not list it');
});
