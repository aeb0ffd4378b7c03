/**
 * URL-mode elicitation edge cases (issue 3, SPEC §4), against the same real parts as
 * url-elicitation.e2e.test.ts: a real Redis, two real OAuth server processes (the MCP
 * authorization server and the third-party provider "acme"), the protected backend, the
 * official SDK client and Chromium. One setup is shared; every test uses its own user, so
 * the tests do not depend on each other's order.
 *
 * A second backend "protected-beta" uses provider "beta", whose token endpoint is a small
 * HTTP fixture that answers every request with `invalid_grant` (a refresh token the provider
 * no longer honours).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { startHttpFixture, sendJson, type HttpFixture } from '../fixtures/provider-http-fixture.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type BrowserCookie, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { openSharedVault, type SharedVault } from '../helpers/vault.js';

const AUDIENCE = 'https://switchboard.test/mcp';
const PREFIX = 'edges:';
const TOKEN_KEY = 'edges-token-key-0123456789abcdef0123456789';
const TEST_TIMEOUT_MS = 90_000;

let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
let deadProvider: HttpFixture;
let gateway: GatewayHandle;
let browser: BrowserHandle;
let vault: SharedVault['vault'];
let shared: SharedVault;

before(async () => {
  [redis, idp, provider, browser, deadProvider] = await Promise.all([
    startRedis(),
    startOAuthServer(),
    startOAuthServer(),
    launchBrowser(),
    startHttpFixture((req, res) => {
      if (req.path === '/token') sendJson(res, 400, { error: 'invalid_grant', error_description: 'refresh token revoked' });
    }),
  ]);
  backend = await startProtectedBackend(provider.issuer);
  gateway = await startGateway({
    issuer: idp.issuer,
    backends: [
      {
        name: 'protected',
        url: backend.url,
        upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['repo'] },
      },
      {
        name: 'protected-beta',
        url: backend.url,
        upstreamAuth: { provider: 'beta', authorizationUrl: provider.authorizationEndpoint, tokenUrl: `${deadProvider.origin}/token`, clientId: 'switchboard', clientSecret: 'beta-client-secret', scopes: ['read'] },
      },
    ],
    overrides: {
      redis: { url: redis.url, keyPrefix: PREFIX },
      secrets: { cookieKey: 'edges-cookie-key-0123456789abcdef0123456789', tokenKey: TOKEN_KEY },
      auth: { issuer: idp.issuer, audience: AUDIENCE, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
  // The same vault the app uses: same Redis prefix, same token key.
  shared = openSharedVault(redis.url, PREFIX, TOKEN_KEY);
  vault = shared.vault;
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  shared?.close();
  await Promise.allSettled([backend?.stop(), provider?.stop(), idp?.stop(), redis?.stop(), deadProvider?.close()]);
});

// ---------------------------------------------------------------- helpers

interface UrlElicitation {
  mode: string;
  elicitationId: string;
  url: string;
  message: string;
}

interface McpUser {
  client: Client;
  completed: string[];
  close(): Promise<void>;
}

async function connectClient(sub: string, opts: { backend?: string; urlMode?: boolean } = {}): Promise<McpUser> {
  const mcpToken = await idp.token({ sub, aud: AUDIENCE });
  const completed: string[] = [];
  const elicitation = opts.urlMode === false ? { form: {} } : { form: {}, url: {} };
  const client = new Client({ name: 'edges-client', version: '1.0.0' }, { capabilities: { elicitation } });
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
    completed.push(n.params.elicitationId);
  });
  const transport = new StreamableHTTPClientTransport(gateway.endpoint(opts.backend ?? 'protected'), { requestInit: { headers: { Authorization: `Bearer ${mcpToken}` } } });
  await client.connect(transport);
  return { client, completed, close: () => client.close() };
}

/** Calls whoami and expects -32042; returns the one URL-mode elicitation. */
async function expectElicitation(client: Client): Promise<UrlElicitation> {
  const refused = await client.callTool({ name: 'whoami', arguments: {} }).then(
    (result) => new Error(`expected -32042, got a result: ${JSON.stringify(result)}`),
    (err: unknown) => err,
  );
  assert.ok(refused instanceof McpError, `expected an McpError, got ${String(refused)}`);
  assert.equal(refused.code, -32042);
  const elicitations = (refused.data as { elicitations: UrlElicitation[] }).elicitations;
  assert.equal(elicitations.length, 1);
  const [elicitation] = elicitations;
  assert.equal(elicitation!.mode, 'url');
  assert.equal(elicitation!.url, `${gateway.url}/connect?elicitationId=${elicitation!.elicitationId}`);
  return elicitation!;
}

/** A separate browser profile signed in (at the MCP authorization server) as `sub`, and at acme as `<sub>-at-acme`. */
async function userContext(sub: string, extra: BrowserCookie[] = []): Promise<BrowserContext> {
  const context = await browser.newContext();
  await context.addCookies([idp.subjectCookie(sub), provider.subjectCookie(`${sub}-at-acme`), ...extra]);
  return context;
}

async function bodyText(page: Page): Promise<string> {
  return (await page.textContent('body')) ?? '';
}

/** Opens the link, checks the consent page, and presses Continue; resolves at the callback page. */
async function continueToProvider(page: Page, link: string): Promise<void> {
  const consent = await page.goto(link);
  assert.equal(consent?.status(), 200, `consent page: ${await bodyText(page)}`);
  await Promise.all([
    page.waitForURL(/\/oauth\/callback\/acme\?/).catch(async (err: Error) => {
      throw new Error(`${err.message}\npage at ${page.url()} says: ${(await bodyText(page)).trim()}`);
    }),
    page.click('button[value="continue"]'),
  ]);
}

/**
 * Walks the consent form and the provider's redirect by hand (with this page's cookies), to
 * hold the callback URL (code and state) without following it.
 */
async function holdCallback(page: Page, elicitation: UrlElicitation): Promise<URL> {
  assert.equal((await page.goto(elicitation.url))?.status(), 200);
  const csrf = await page.inputValue('input[name="csrf"]');
  const toProvider = await page.request.post(`${gateway.url}/connect`, { form: { elicitationId: elicitation.elicitationId, action: 'continue', csrf }, maxRedirects: 0 });
  assert.equal(toProvider.status(), 303);
  const authorize = new URL(toProvider.headers()['location']!);
  assert.equal(authorize.origin + authorize.pathname, provider.authorizationEndpoint);
  assert.equal(authorize.searchParams.get('redirect_uri'), `${gateway.url}/oauth/callback/acme`, "the provider's own redirect URI");
  const fromProvider = await page.request.get(authorize.href, { maxRedirects: 0 });
  assert.equal(fromProvider.status(), 302);
  const callback = new URL(fromProvider.headers()['location']!);
  assert.equal(callback.origin + callback.pathname, `${gateway.url}/oauth/callback/acme`);
  assert.ok(callback.searchParams.get('state') && callback.searchParams.get('code'), 'the callback carries state and code');
  return callback;
}

/** The whole happy path for one elicitation: consent, provider, callback, "Connected". */
async function linkAccount(context: BrowserContext, link: string): Promise<void> {
  const page = await context.newPage();
  await continueToProvider(page, link);
  assert.match(await bodyText(page), /return to your client/i);
  await page.close();
}

async function eventually(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function changeOneCharacter(value: string): string {
  const first = value[0] === 'A' ? 'B' : 'A';
  return first + value.slice(1);
}

// ---------------------------------------------------------------- tests

test('callback state: tampered → 400 and the flow still completes; unknown → 400; replayed → 400', { timeout: TEST_TIMEOUT_MS }, async () => {
  const user = await connectClient('carol');
  const context = await userContext('carol');
  try {
    const elicitation = await expectElicitation(user.client);
    const page = await context.newPage();
    const callback = await holdCallback(page, elicitation);
    const state = callback.searchParams.get('state')!;

    // One character of state changed: refused, nothing stored, nothing completed.
    const tampered = new URL(callback);
    tampered.searchParams.set('state', changeOneCharacter(state));
    const tamperedAnswer = await page.goto(tampered.href);
    assert.equal(tamperedAnswer?.status(), 400);
    assert.match(await bodyText(page), /no longer valid/i);
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'carol'), 'acme'), undefined);
    assert.deepEqual(user.completed, []);

    // A state the gateway never issued (or one long expired), and none at all: 400 too.
    const unknown = new URL(callback);
    unknown.searchParams.set('state', 'x'.repeat(43));
    assert.equal((await page.goto(unknown.href))?.status(), 400);
    const missing = new URL(callback);
    missing.searchParams.delete('state');
    assert.equal((await page.goto(missing.href))?.status(), 400);

    // The real callback still works: the tampered one did not use the state up.
    const real = await page.goto(callback.href);
    assert.equal(real?.status(), 200, await bodyText(page));
    assert.match(await bodyText(page), /return to your client/i);
    await eventually('notifications/elicitation/complete', () => user.completed.includes(elicitation.elicitationId));
    const retried = await user.client.callTool({ name: 'whoami', arguments: {} });
    assert.match(JSON.stringify(retried.content), /third-party user: carol-at-acme/);

    // The same callback URL again: state is single use.
    const replayed = await page.goto(callback.href);
    assert.equal(replayed?.status(), 400);
    assert.match(await bodyText(page), /no longer valid/i);
  } finally {
    await context.close();
    await user.close();
  }
});

test('a leaked callback URL opened in another browser is refused and does not use the state up: the right browser still completes', { timeout: TEST_TIMEOUT_MS }, async () => {
  const userKey = userKeyOf(idp.issuer, 'kate');
  const user = await connectClient('kate');
  const context = await userContext('kate');
  const mallory = await userContext('mallory');
  const signedOut = await browser.newContext();
  try {
    const elicitation = await expectElicitation(user.client);
    const page = await context.newPage();
    const callback = await holdCallback(page, elicitation);
    // Mallory is signed in to Switchboard (her own session), the other browser is not.
    const malloryPage = await mallory.newPage();
    assert.equal((await malloryPage.goto(`${gateway.url}/connections`))?.status(), 200);
    for (const [who, foreign] of [['another user', malloryPage], ['a signed-out browser', await signedOut.newPage()]] as const) {
      const refused = await foreign.goto(callback.href);
      assert.equal(refused?.status(), 403, who);
      assert.match(await bodyText(foreign), /another browser session or by another account/, who);
    }
    assert.equal(await vault.get(userKey, 'acme'), undefined, 'nothing stored for kate');
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'mallory'), 'acme'), undefined, 'nothing stored for mallory');
    assert.deepEqual(user.completed, []);

    // The browser that started the flow completes with the very same state and code.
    const real = await page.goto(callback.href);
    assert.equal(real?.status(), 200, await bodyText(page));
    assert.match(await bodyText(page), /return to your client/i);
    await eventually('notifications/elicitation/complete', () => user.completed.includes(elicitation.elicitationId));
    assert.ok(await vault.get(userKey, 'acme'), 'kate is linked');
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'mallory'), 'acme'), undefined, 'mallory still is not');
  } finally {
    await Promise.all([context.close(), mallory.close(), signedOut.close()]);
    await user.close();
  }
});

test('consent POST with a wrong or missing CSRF token → 403, and the elicitation stays pending', { timeout: TEST_TIMEOUT_MS }, async () => {
  const user = await connectClient('dave');
  const context = await userContext('dave');
  try {
    const elicitation = await expectElicitation(user.client);
    const page = await context.newPage();
    // Signs the browser in (via /login) and shows the consent page.
    assert.equal((await page.goto(elicitation.url))?.status(), 200);
    const realCsrf = await page.inputValue('input[name="csrf"]');
    assert.ok(realCsrf.length > 10);

    const attempts: Array<Record<string, string>> = [
      { elicitationId: elicitation.elicitationId, action: 'continue', csrf: changeOneCharacter(realCsrf) },
      { elicitationId: elicitation.elicitationId, action: 'continue' },
      { elicitationId: elicitation.elicitationId, action: 'cancel', csrf: 'not-the-token' },
      { elicitationId: elicitation.elicitationId, action: 'cancel', csrf: '' },
    ];
    for (const form of attempts) {
      const res = await page.request.post(`${gateway.url}/connect`, { form, maxRedirects: 0 });
      assert.equal(res.status(), 403, `form ${JSON.stringify(form)}`);
      assert.match(await res.text(), /Request refused/);
    }

    // Nothing changed: no redirect to the provider happened, the link still shows the consent page.
    assert.equal((await page.goto(elicitation.url))?.status(), 200);
    assert.match(await bodyText(page), /acme/);
    assert.ok(await page.isVisible('button[value="continue"]'));
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'dave'), 'acme'), undefined);

    // And with the right token, the same form is accepted.
    const accepted = await page.request.post(`${gateway.url}/connect`, { form: { elicitationId: elicitation.elicitationId, action: 'cancel', csrf: realCsrf }, maxRedirects: 0 });
    assert.equal(accepted.status(), 200);
    assert.match(await accepted.text(), /Connection cancelled/);
  } finally {
    await context.close();
    await user.close();
  }
});

test('Cancel declines: the link answers 410 and the next call gets a new elicitation', { timeout: TEST_TIMEOUT_MS }, async () => {
  const user = await connectClient('erin');
  const context = await userContext('erin');
  try {
    const first = await expectElicitation(user.client);
    const page = await context.newPage();
    assert.equal((await page.goto(first.url))?.status(), 200);
    const [declined] = await Promise.all([page.waitForResponse((r) => r.url() === `${gateway.url}/connect` && r.request().method() === 'POST'), page.click('button[value="cancel"]')]);
    assert.equal(declined.status(), 200);
    await page.waitForLoadState();
    assert.match(await bodyText(page), /Connection cancelled/);
    assert.match(await bodyText(page), /acme account was not connected/);

    const reopened = await page.goto(first.url);
    assert.equal(reopened?.status(), 410);
    assert.match(await bodyText(page), /cancelled/i);
    assert.deepEqual(user.completed, [], 'a declined elicitation is not reported as complete');

    const second = await expectElicitation(user.client);
    assert.notEqual(second.elicitationId, first.elicitationId);
    assert.equal((await page.goto(second.url))?.status(), 200, 'the new link is usable');
  } finally {
    await context.close();
    await user.close();
  }
});

test('provider answers access_denied: 403 page with a retry link; the same link then completes', { timeout: TEST_TIMEOUT_MS }, async () => {
  const user = await connectClient('frank');
  const errorCookie = provider.errorCookie('access_denied');
  const context = await userContext('frank', [errorCookie]);
  try {
    const elicitation = await expectElicitation(user.client);
    const page = await context.newPage();
    assert.equal((await page.goto(elicitation.url))?.status(), 200);
    const [callback] = await Promise.all([page.waitForResponse((r) => r.url().startsWith(`${gateway.url}/oauth/callback/acme?`)), page.click('button[value="continue"]')]);
    assert.equal(callback.status(), 403);
    assert.equal(new URL(callback.url()).searchParams.get('error'), 'access_denied');
    await page.waitForLoadState();
    assert.match(await bodyText(page), /You declined at acme/);
    const retry = page.locator('a', { hasText: 'Try again' });
    assert.equal(await retry.getAttribute('href'), `/connect?elicitationId=${elicitation.elicitationId}`);
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'frank'), 'acme'), undefined);
    assert.deepEqual(user.completed, []);

    // Without the error cookie, the retry link goes through.
    await context.clearCookies({ name: errorCookie.name });
    await Promise.all([page.waitForURL(/\/connect\?elicitationId=/), retry.click()]);
    await Promise.all([page.waitForURL(/\/oauth\/callback\/acme\?/), page.click('button[value="continue"]')]);
    assert.match(await bodyText(page), /return to your client/i);
    await eventually('notifications/elicitation/complete', () => user.completed.includes(elicitation.elicitationId));
    const retried = await user.client.callTool({ name: 'whoami', arguments: {} });
    assert.match(JSON.stringify(retried.content), /third-party user: frank-at-acme/);
  } finally {
    await context.close();
    await user.close();
  }
});

test('an expired token is refreshed through the gateway; a refresh the provider rejects (invalid_grant) elicits again', { timeout: TEST_TIMEOUT_MS }, async () => {
  const userKey = userKeyOf(idp.issuer, 'gina');
  const user = await connectClient('gina');
  const context = await userContext('gina');
  try {
    // Link acme normally, then age the stored access token past its expiry.
    const elicitation = await expectElicitation(user.client);
    await linkAccount(context, elicitation.url);
    const linked = await vault.get(userKey, 'acme');
    assert.ok(linked, 'tokens stored');
    assert.ok(linked.refreshToken, 'the provider issued a refresh token');
    await vault.put(userKey, 'acme', { ...linked, expiresAt: Date.now() - 60_000 });
    // The provider's JWTs have second-resolution iat/exp: let a second pass so that the
    // refreshed token differs from the first one.
    await new Promise((resolve) => setTimeout(resolve, 1_100));

    const retried = await user.client.callTool({ name: 'whoami', arguments: {} });
    assert.equal(retried.isError, undefined);
    assert.match(JSON.stringify(retried.content), /third-party user: gina-at-acme/);
    const refreshed = await vault.get(userKey, 'acme');
    assert.ok(refreshed, 'still linked after the refresh');
    assert.notEqual(refreshed.accessToken, linked.accessToken, 'a new access token was stored');
    assert.ok(refreshed.expiresAt !== undefined && refreshed.expiresAt > Date.now(), 'the new token is not expired');
    const seen = await backend.seenAuthorizations();
    assert.equal(seen.at(-1), `Bearer ${refreshed.accessToken}`, 'the backend got the refreshed token');
  } finally {
    await user.close();
  }

  // Provider "beta" answers invalid_grant to any refresh.
  const beta = await connectClient('gina', { backend: 'protected-beta' });
  try {
    await vault.put(userKey, 'beta', { accessToken: 'beta-old-access', tokenType: 'Bearer', refreshToken: 'beta-revoked-refresh', expiresAt: Date.now() - 60_000 });
    const before = deadProvider.hits('/token').length;
    const elicitation = await expectElicitation(beta.client);
    assert.match(elicitation.message, /beta/);
    const tokenRequests = deadProvider.hits('/token').slice(before);
    assert.equal(tokenRequests.length, 1, 'one refresh attempt');
    assert.equal(tokenRequests[0]!.form.get('grant_type'), 'refresh_token');
    assert.equal(tokenRequests[0]!.form.get('refresh_token'), 'beta-revoked-refresh');
    assert.equal(await vault.get(userKey, 'beta'), undefined, 'the rejected tokens were deleted');
    assert.ok(!(await backend.seenAuthorizations()).includes('Bearer beta-old-access'), 'the expired token was not sent');
    // The link is a real, pending one.
    const page = await context.newPage();
    assert.equal((await page.goto(elicitation.url))?.status(), 200);
    assert.match(await bodyText(page), /beta/);
  } finally {
    await context.close();
    await beta.close();
  }
});

test('a form-only client gets the link as text: isError tool result, and a JSON-RPC error for other requests', { timeout: TEST_TIMEOUT_MS }, async () => {
  const user = await connectClient('hank', { urlMode: false });
  try {
    const result = await user.client.callTool({ name: 'whoami', arguments: {} });
    assert.equal(result.isError, true);
    const content = result.content as Array<{ type: string; text: string }>;
    assert.equal(content.length, 1);
    assert.equal(content[0]!.type, 'text');
    const text = content[0]!.text;
    const match = new RegExp(`${gateway.url.replace(/[.]/g, '\\.')}/connect\\?elicitationId=([A-Za-z0-9_-]{32})`).exec(text);
    assert.ok(match, `the text carries the connect link: ${text}`);
    assert.match(text, /retry/i);
    assert.match(text, /acme/);

    // Lists are answered by the gateway while unlinked (issue 12); any other request that
    // needs the account gets the link in a JSON-RPC error.
    assert.ok((await user.client.listTools()).tools.length > 0);
    const prompted = await user.client.getPrompt({ name: 'greeting' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(prompted instanceof McpError, `expected an McpError, got ${String(prompted)}`);
    assert.equal(prompted.code, -32014);
    assert.match(prompted.message, /\/connect\?elicitationId=[A-Za-z0-9_-]{32}/);
    assert.match(prompted.message, /retry/i);
    const data = prompted.data as { url: string; elicitationId: string };
    assert.equal(data.url, `${gateway.url}/connect?elicitationId=${data.elicitationId}`);
  } finally {
    await user.close();
  }
});

test('/connections: lists the link, Disconnect deletes it (CSRF-checked), and the next call elicits again', { timeout: TEST_TIMEOUT_MS }, async () => {
  const userKey = userKeyOf(idp.issuer, 'ivy');
  const user = await connectClient('ivy');
  const context = await userContext('ivy');
  try {
    const elicitation = await expectElicitation(user.client);
    await linkAccount(context, elicitation.url);
    assert.ok(await vault.get(userKey, 'acme'));

    const page = await context.newPage();
    assert.equal((await page.goto(`${gateway.url}/connections`))?.status(), 200);
    const acmeRow = page.locator('li', { hasText: 'acme' });
    assert.match((await acmeRow.textContent()) ?? '', /Connected/);
    assert.doesNotMatch((await acmeRow.textContent()) ?? '', /Not connected/);

    // Without (or with a wrong) CSRF token: refused, nothing deleted.
    const forms: Array<Record<string, string>> = [{}, { csrf: 'forged' }];
    for (const form of forms) {
      const res = await page.request.post(`${gateway.url}/connections/acme/disconnect`, { form, maxRedirects: 0 });
      assert.equal(res.status(), 403, `form ${JSON.stringify(form)}`);
    }
    assert.ok(await vault.get(userKey, 'acme'), 'still linked after the refused requests');

    await Promise.all([page.waitForResponse((r) => r.url() === `${gateway.url}/connections` && r.request().method() === 'GET'), page.click('button[aria-label="Disconnect acme"]')]);
    await page.waitForLoadState();
    assert.equal(new URL(page.url()).pathname, '/connections');
    assert.match((await page.locator('li', { hasText: 'acme' }).textContent()) ?? '', /Not connected/);
    assert.equal(await vault.get(userKey, 'acme'), undefined, 'the vault entry is gone');

    const again = await expectElicitation(user.client);
    assert.notEqual(again.elicitationId, elicitation.elicitationId);
  } finally {
    await context.close();
    await user.close();
  }
});
