/**
 * Cookie tossing against the whole gateway (issue 12, security defect 1; RFC 6265 §8.6): a
 * host of the same site (here: anyone who can set cookies for 127.0.0.1, which plain http
 * allows) plants the attacker's own, validly signed `sb_session` with a longer Path in the
 * victim's browser, which then sends it before the victim's own. Before the fix the first live
 * cookie won, so the victim's approval at the provider stored the victim's third-party tokens
 * in the attacker's vault: `/oauth/callback` compared the attacker with himself. Now two
 * session cookies are no session at all. (With an https publicUrl the cookie is
 * `__Host-sb_session`, which no other host can plant; see login.test.ts.)
 *
 * Real parts: the gateway, the OAuth server process as MCP authorization server and as the
 * provider "acme", Chromium; the elicitation is created with the gateway's own store.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { userKeyOf } from '../../src/auth/principal.js';
import { ElicitationStore } from '../../src/connect/elicitations.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { TokenVault } from '../../src/connect/token-vault.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

const TOKEN_KEY = 'tossing-token-key-0123456789abcdef0123456789';
const TEST_TIMEOUT = { timeout: 90_000 };

let idp: OAuthHandle;
let provider: OAuthHandle;
let browser: BrowserHandle;
let gateway: GatewayHandle;
let store: MemoryStore;

before(async () => {
  [idp, provider, browser] = await Promise.all([startOAuthServer(), startOAuthServer(), launchBrowser()]);
  store = new MemoryStore();
  gateway = await startGateway({
    issuer: idp.issuer,
    store,
    backends: [
      {
        name: 'protected',
        url: 'http://127.0.0.1:9/mcp', // never reached: the flow ends at the vault
        upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-secret', scopes: ['repo'] },
      },
    ],
    overrides: {
      secrets: { cookieKey: 'tossing-cookie-key-0123456789abcdef0123456789', tokenKey: TOKEN_KEY },
      auth: { issuer: idp.issuer, audience: 'https://switchboard.test/mcp', algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  await Promise.allSettled([idp?.stop(), provider?.stop()]);
});

/** A browser signed in to Switchboard as `sub` (and at acme as `<sub>-at-acme`); its session cookie's value. */
async function signedIn(sub: string): Promise<{ context: BrowserContext; session: string }> {
  const context = await browser.newContext();
  await context.addCookies([idp.subjectCookie(sub), provider.subjectCookie(`${sub}-at-acme`)]);
  const page = await context.newPage();
  await page.goto(`${gateway.url}/login?returnTo=/connections`);
  assert.equal(page.url(), `${gateway.url}/connections`);
  await page.close();
  const session = (await context.cookies(gateway.url)).find((c) => c.name === 'sb_session');
  assert.ok(session, `${sub} has a session cookie`);
  return { context, session: session.value };
}

test("a planted second session cookie signs the victim out: /connections, /connect and /oauth/callback do not act as the attacker", TEST_TIMEOUT, async () => {
  const victim = await signedIn('alice');
  const attacker = await signedIn('mallory');
  try {
    // The attacker's own link: an elicitation for mallory, consented in his browser up to the
    // provider's authorization URL, whose state is bound to his browser session.
    const mallory = userKeyOf(idp.issuer, 'mallory');
    const elicitation = await new ElicitationStore(store).create(
      { iss: idp.issuer, sub: 'mallory', userKey: mallory, scopes: new Set(), exp: Math.floor(Date.now() / 1000) + 600, claims: {} },
      { backend: 'protected', provider: 'acme' },
    );
    const consent = await attacker.context.request.get(`${gateway.url}/connect?elicitationId=${elicitation.id}`);
    assert.equal(consent.status(), 200);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await consent.text())?.[1];
    assert.ok(csrf, 'the consent form carries a CSRF token');
    const toProvider = await attacker.context.request.post(`${gateway.url}/connect`, {
      form: { elicitationId: elicitation.id, csrf, action: 'continue' },
      maxRedirects: 0,
    });
    assert.equal(toProvider.status(), 303);
    const authorization = toProvider.headers().location!;
    assert.ok(authorization.startsWith(provider.authorizationEndpoint), authorization);

    // The toss: mallory's live, validly signed cookie on the paths of the flow.
    const domain = new URL(gateway.url).hostname;
    await victim.context.addCookies(['/connections', '/connect', '/oauth'].map((path) => ({ name: 'sb_session', value: attacker.session, domain, path })));

    const connections = await victim.context.request.get(`${gateway.url}/connections`, { maxRedirects: 0 });
    assert.equal(connections.status(), 303, 'not the attacker’s connections page');
    assert.equal(connections.headers().location, '/login?returnTo=%2Fconnections');
    const connect = await victim.context.request.get(`${gateway.url}/connect?elicitationId=${elicitation.id}`, { maxRedirects: 0 });
    assert.equal(connect.status(), 303, 'not the consent page of the attacker’s link');
    assert.match(connect.headers().location!, /^\/login\?returnTo=/);

    // The victim, signed in at acme, follows the attacker's authorization URL: acme sends the
    // victim's code to /oauth/callback, along with both session cookies.
    const page = await victim.context.newPage();
    const callback = await page.goto(authorization);
    assert.ok(page.url().startsWith(`${gateway.url}/oauth/callback`), page.url());
    assert.equal(callback!.status(), 403);
    assert.match(await page.locator('h1').innerText(), /refused/i);

    const vault = new TokenVault(store, createTokenCipher(TOKEN_KEY));
    assert.equal(await vault.get(mallory, 'acme'), undefined, "the victim's acme tokens are not in the attacker's vault");
    assert.equal(await vault.get(userKeyOf(idp.issuer, 'alice'), 'acme'), undefined);
    assert.equal((await new ElicitationStore(store).get(elicitation.id))?.status, 'pending');
  } finally {
    await victim.context.close();
    await attacker.context.close();
  }
});
