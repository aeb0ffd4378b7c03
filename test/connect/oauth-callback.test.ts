/**
 * The provider callback and Connect on /connections (issue 12: defects 2, 4 and 6, and
 * "What users must get" item 4), against real parts: Redis, the MCP authorization server and
 * the configured provider "acme" (oauth2-mock-server processes), two discovered providers on
 * a small HTTP fixture ("strict" advertises RFC 9207 `iss`, "lax" does not), and Chromium.
 *
 * Each test uses its own user; every refusal is checked to leave the vault empty, and then
 * the same state to still complete in the browser that started the flow.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { BrowserContext, Page } from 'playwright-core';
import { userKeyOf, type Principal } from '../../src/auth/principal.js';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { registerBrowserFlows } from '../../src/connect/browser-flows.js';
import { ElicitationStore, type Elicitation } from '../../src/connect/elicitations.js';
import { startDiscoveredProvider, type DiscoveredProvider } from '../fixtures/discovered-provider.js';
import { launchBrowser, watchPage, type BrowserHandle } from '../helpers/browser.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { openSharedVault, type SharedVault } from '../helpers/vault.js';
import { notifySession } from '../../src/sessions/session-notifier.js';

const PREFIX = 'callback:';
const TOKEN_KEY = 'callback-token-key-0123456789abcdef012345678';
const COOKIE_KEY = 'callback-cookie-key-0123456789abcdef01234567';
const STRICT_SCOPES = ['files:read', 'files:write'];
const TEST_TIMEOUT_MS = 90_000;

let redis: RedisHandle;
let idp: OAuthHandle;
let acme: OAuthHandle;
let discovered: DiscoveredProvider;
let gateway: GatewayHandle;
let browser: BrowserHandle;
let store: SharedVault['store'];
let vault: SharedVault['vault'];
let shared: SharedVault;

function configFor(port: number): ConfigInput {
  return {
    publicUrl: `http://127.0.0.1:${port}`,
    listen: { host: '127.0.0.1', port },
    redis: { url: redis.url, keyPrefix: PREFIX },
    secrets: { cookieKey: COOKIE_KEY, tokenKey: TOKEN_KEY },
    auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    log: { level: 'silent' },
    backends: [
      { name: 'acme-tools', url: 'http://127.0.0.1:9/mcp', upstreamAuth: { provider: 'acme', authorizationUrl: acme.authorizationEndpoint, tokenUrl: acme.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-secret', scopes: ['repo'] } },
      { name: 'strict-tools', url: discovered.backendUrl('strict'), upstreamAuth: { provider: 'strict', discover: true } },
      { name: 'lax-tools', url: discovered.backendUrl('lax'), upstreamAuth: { provider: 'lax', discover: true } },
    ],
  };
}

before(async () => {
  [redis, idp, acme, browser, discovered] = await Promise.all([
    startRedis(),
    startOAuthServer(),
    startOAuthServer(),
    launchBrowser(),
    startDiscoveredProvider({ strict: { scopes: STRICT_SCOPES, issParameter: true }, lax: { scopes: ['read'], issParameter: false } }),
  ]);
  const port = await freePort();
  const config = configFor(port);
  gateway = await startGateway({ issuer: idp.issuer, backends: config.backends, port, overrides: config });
  // The same vault the app uses: same Redis prefix, same token key.
  shared = openSharedVault(redis.url, PREFIX, TOKEN_KEY);
  ({ store, vault } = shared);
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  shared?.close();
  await Promise.allSettled([acme?.stop(), idp?.stop(), redis?.stop(), discovered?.close()]);
});

// ---------------------------------------------------------------- helpers

const PROVIDERS = ['acme', 'strict', 'lax'] as const;

/** A browser profile signed in to `base` as `sub` (via /connections → /login → back), at acme as `<sub>-at-acme`. */
async function signedIn(sub: string, base = gateway.url): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  await context.addCookies([idp.subjectCookie(sub), acme.subjectCookie(`${sub}-at-acme`)]);
  const page = await context.newPage();
  const landing = await page.goto(`${base}/connections`);
  assert.equal(landing?.status(), 200, await bodyText(page));
  assert.equal(new URL(page.url()).pathname, '/connections');
  return { context, page };
}

async function bodyText(page: Page): Promise<string> {
  return (await page.textContent('body')) ?? '';
}

/**
 * Presses Connect for `provider` by hand and follows the provider's redirect by hand, to
 * hold the callback URL (code, state, iss) without opening it.
 */
async function heldCallback(page: Page, provider: string, base = gateway.url): Promise<URL> {
  const csrf = await page.locator('input[name="csrf"]').first().inputValue();
  const toProvider = await page.request.post(`${base}/connections/${provider}/connect`, { form: { csrf }, maxRedirects: 0 });
  assert.equal(toProvider.status(), 303, await toProvider.text());
  const authorize = new URL(toProvider.headers()['location']!);
  assert.equal(authorize.searchParams.get('redirect_uri'), `${base}/oauth/callback/${provider}`, "the provider's own redirect URI");
  assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256');
  assert.match(authorize.searchParams.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
  const fromProvider = await page.request.get(authorize.href, { maxRedirects: 0 });
  assert.equal(fromProvider.status(), 302);
  const callback = new URL(fromProvider.headers()['location']!);
  assert.equal(callback.origin + callback.pathname, `${base}/oauth/callback/${provider}`);
  return callback;
}

/** The callback URL at another path, and/or with `iss` replaced (null: removed; array: repeated). */
function altered(callback: URL, o: { path?: string; iss?: string | null | string[] }): string {
  const url = new URL(callback);
  if (o.path !== undefined) url.pathname = o.path;
  if (o.iss !== undefined) {
    url.searchParams.delete('iss');
    for (const value of o.iss === null ? [] : [o.iss].flat()) url.searchParams.append('iss', value);
  }
  return url.href;
}

/** GET without following redirects, with the page's cookies. */
async function open(page: Page, url: string): Promise<{ status: number; location?: string; text: string }> {
  const res = await page.request.get(url, { maxRedirects: 0 });
  return { status: res.status(), location: res.headers()['location'], text: await res.text() };
}

async function assertNothingLinked(sub: string): Promise<void> {
  for (const provider of PROVIDERS) assert.equal(await vault.get(userKeyOf(idp.issuer, sub), provider), undefined, `${sub} has no ${provider} tokens`);
}

function principal(sub: string): Principal {
  return { iss: idp.issuer, sub, userKey: userKeyOf(idp.issuer, sub), scopes: new Set(), exp: 0, claims: {} };
}

// ---------------------------------------------------------------- tests

test('Connect on /connections in Chromium: configured and discovered providers link, and the page shows them connected', { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, page } = await signedIn('alice');
  const { problems } = watchPage(page);
  try {
    for (const provider of PROVIDERS) assert.match((await page.locator('li', { hasText: provider }).textContent()) ?? '', /Not connected/);
    for (const provider of ['acme', 'strict'] as const) {
      const [callback, back] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${gateway.url}/oauth/callback/${provider}?`)),
        page.waitForResponse((r) => r.url() === `${gateway.url}/connections` && r.request().method() === 'GET'),
        page.getByRole('button', { name: `Connect ${provider}`, exact: true }).click(),
      ]);
      assert.equal(callback.status(), 303, `${provider}: the callback sends the browser back to /connections`);
      assert.equal(back.status(), 200);
      await page.waitForLoadState();
      const row = (await page.locator('li', { hasText: provider }).textContent()) ?? '';
      assert.match(row, /Connected/, provider);
      assert.doesNotMatch(row, /Not connected/, provider);
      assert.equal(await page.getByRole('button', { name: `Connect ${provider}`, exact: true }).count(), 0, `${provider}: no Connect once linked`);
    }
    const acmeTokens = await vault.get(userKeyOf(idp.issuer, 'alice'), 'acme');
    assert.ok(acmeTokens?.accessToken, 'acme tokens stored for alice');
    const strictTokens = await vault.get(userKeyOf(idp.issuer, 'alice'), 'strict');
    assert.equal(strictTokens?.accessToken, discovered.issuedTokens('strict').at(-1), 'the token the strict provider issued');
    // Dynamic registration registered the provider's own redirect URI.
    assert.deepEqual(discovered.registeredRedirectUris('strict'), [[`${gateway.url}/oauth/callback/strict`]]);
    assert.deepEqual(problems, [], 'no CSP violation: form-action allows the providers Connect redirects to');
  } finally {
    await context.close();
  }
});

test('Connect POST: bad CSRF → refusal page, unknown provider → 404 page, signed out → sign-in; nothing starts', { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, page } = await signedIn('bea');
  const signedOut = await browser.newContext();
  try {
    const csrf = await page.locator('input[name="csrf"]').first().inputValue();
    const forms: Array<Record<string, string>> = [{}, { csrf: 'forged' }, { csrf: `${csrf}x` }];
    for (const form of forms) {
      const res = await page.request.post(`${gateway.url}/connections/acme/connect`, { form, maxRedirects: 0 });
      assert.equal(res.status(), 403, JSON.stringify(form));
      assert.match(await res.text(), /Request refused/);
    }
    const unknown = await page.request.post(`${gateway.url}/connections/nobody/connect`, { form: { csrf }, maxRedirects: 0 });
    assert.equal(unknown.status(), 404);
    assert.match(await unknown.text(), /Unknown provider/);
    const anonymous = await signedOut.request.post(`${gateway.url}/connections/acme/connect`, { form: { csrf }, maxRedirects: 0 });
    assert.equal(anonymous.status(), 303);
    assert.match(anonymous.headers()['location'] ?? '', /^\/login\?returnTo=%2Fconnections$/);
    await assertNothingLinked('bea');
  } finally {
    await Promise.all([context.close(), signedOut.close()]);
  }
});

test("mix-up: provider A's answer at /oauth/callback/B, or a discovered provider's at /oauth/callback, is refused and changes nothing", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, page } = await signedIn('carl');
  try {
    const strict = await heldCallback(page, 'strict');
    for (const path of ['/oauth/callback/acme', '/oauth/callback/lax', '/oauth/callback']) {
      const refused = await open(page, altered(strict, { path }));
      assert.equal(refused.status, 403, path);
      assert.match(refused.text, /did not come back from strict/, path);
    }
    await assertNothingLinked('carl');
    // The state was not used up: the answer at the right path completes.
    const accepted = await open(page, strict.href);
    assert.equal(accepted.status, 303, accepted.text);
    assert.equal(accepted.location, '/connections');
    assert.ok(await vault.get(userKeyOf(idp.issuer, 'carl'), 'strict'));

    // A provider configured without discover still answers at the legacy path.
    const legacy = await heldCallback(page, 'acme');
    const viaLegacy = await open(page, altered(legacy, { path: '/oauth/callback' }));
    assert.equal(viaLegacy.status, 303, viaLegacy.text);
    assert.ok(await vault.get(userKeyOf(idp.issuer, 'carl'), 'acme'), 'linked through /oauth/callback');
  } finally {
    await context.close();
  }
});

test('RFC 9207: iss missing, foreign or repeated is refused where the metadata advertises it; a present iss must match everywhere', { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, page } = await signedIn('dina');
  try {
    const strict = await heldCallback(page, 'strict');
    assert.equal(strict.searchParams.get('iss'), discovered.issuer('strict'));
    for (const iss of [null, discovered.issuer('lax'), `${discovered.issuer('strict')}/`, [discovered.issuer('strict'), discovered.issuer('strict')]]) {
      const refused = await open(page, altered(strict, { iss }));
      assert.equal(refused.status, 403, `iss ${JSON.stringify(iss)}`);
    }
    await assertNothingLinked('dina');
    assert.equal((await open(page, strict.href)).status, 303, 'the untouched answer completes');
    assert.ok(await vault.get(userKeyOf(idp.issuer, 'dina'), 'strict'));

    // "lax" does not advertise iss: an answer without one is fine, a foreign one is not.
    const lax = await heldCallback(page, 'lax');
    assert.equal((await open(page, altered(lax, { iss: discovered.issuer('strict') }))).status, 403);
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'dina'), 'lax'), undefined);
    assert.equal((await open(page, altered(lax, { iss: null }))).status, 303);
    assert.ok(await vault.get(userKeyOf(idp.issuer, 'dina'), 'lax'));
  } finally {
    await context.close();
  }
});

test('consent with discover and no configured scopes lists the discovered scopes, which the authorization request carries', { timeout: TEST_TIMEOUT_MS }, async () => {
  const { context, page } = await signedIn('emil');
  try {
    const elicitation = await new ElicitationStore(store).create(principal('emil'), { backend: 'strict-tools', provider: 'strict' });
    assert.equal((await page.goto(`${gateway.url}/connect?elicitationId=${elicitation.id}`))?.status(), 200);
    const scopes = await page.locator('ul.scopes code').allTextContents();
    assert.deepEqual(scopes, STRICT_SCOPES);
    assert.doesNotMatch(await bodyText(page), /No specific permissions/);
    const csrf = await page.inputValue('input[name="csrf"]');
    const toProvider = await page.request.post(`${gateway.url}/connect`, { form: { elicitationId: elicitation.id, action: 'continue', csrf }, maxRedirects: 0 });
    assert.equal(toProvider.status(), 303);
    const authorize = new URL(toProvider.headers()['location']!);
    assert.equal(authorize.searchParams.get('scope'), STRICT_SCOPES.join(' '), 'what the page showed is what is asked for');
    assert.equal(authorize.searchParams.get('redirect_uri'), `${gateway.url}/oauth/callback/strict`);
  } finally {
    await context.close();
  }
});

test('afterLink runs after the tokens are stored (Connect) and after completion (elicitation); a failing hook is logged, not shown', { timeout: TEST_TIMEOUT_MS }, async () => {
  // A second gateway front over the first one's MCP context, wired with hooks as app.ts may do.
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logs: string[] = [];
  const app: FastifyInstance = Fastify({ logger: { level: 'info', stream: new Writable({ write: (chunk, _e, done) => (logs.push(String(chunk)), done()) }) } });
  const calls: Array<{ provider: string; userKey: string; elicitation?: Elicitation; stored: boolean; status?: string }> = [];
  registerBrowserFlows(app, { ...gateway.app.mcp, config: parseConfig(configFor(port)) }, {
    notify: (userKey, sessionId, data) => notifySession(gateway.app.mcp, userKey, sessionId, data),
    async afterLink(link) {
      const stored = (await vault.get(link.userKey, link.provider)) !== undefined;
      const status = link.elicitation ? (await new ElicitationStore(store).get(link.elicitation.id))?.status : undefined;
      calls.push({ ...link, stored, ...(status ? { status } : {}) });
      if (link.elicitation) throw new Error('the hook broke');
    },
  });
  await app.listen({ port, host: '127.0.0.1' });
  const { context, page } = await signedIn('fay', base);
  try {
    const userKey = userKeyOf(idp.issuer, 'fay');
    const connect = await open(page, (await heldCallback(page, 'acme', base)).href);
    assert.equal(connect.status, 303);
    assert.deepEqual(calls, [{ userKey, provider: 'acme', stored: true }]);

    const elicitation = await new ElicitationStore(store).create(principal('fay'), { backend: 'lax-tools', provider: 'lax' });
    assert.equal((await page.goto(`${base}/connect?elicitationId=${elicitation.id}`))?.status(), 200);
    const [callback] = await Promise.all([page.waitForResponse((r) => r.url().startsWith(`${base}/oauth/callback/lax?`)), page.click('button[value="continue"]')]);
    assert.equal(callback.status(), 200, 'the failing hook does not change the answer');
    await page.waitForLoadState();
    assert.match(await bodyText(page), /return to your client/i);
    assert.equal(calls.length, 2);
    assert.equal(calls[1]!.elicitation?.id, elicitation.id);
    assert.deepEqual({ ...calls[1], elicitation: undefined }, { userKey, provider: 'lax', stored: true, status: 'complete', elicitation: undefined });
    const failure = logs.find((l) => l.includes('after-link hook failed'));
    assert.ok(failure?.includes('the hook broke'), 'the failure is logged');
    const tokens = [...discovered.issuedTokens('lax'), (await vault.get(userKey, 'acme'))!.accessToken];
    for (const token of tokens) assert.ok(!logs.join('').includes(token), 'no token in any log line');
  } finally {
    await context.close();
    await app.close();
  }
});
