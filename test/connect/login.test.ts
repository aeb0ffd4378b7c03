/**
 * Browser sign-in (SPEC §2 `/login`, `/login/callback`, `/logout`; §4 step 3) driven in a real
 * Chromium against the real OAuth server process: OIDC code + PKCE, the session cookie's
 * attributes, returnTo, and the attacks — replayed `state`, a `state` carried to another
 * browser, a tampered cookie, cookies planted by another host (cookie tossing), sign-out
 * without the CSRF token (also from a form on another origin of the same site), hostile
 * returnTo targets (dot segments included), a refused sign-in, a failing token endpoint and
 * an unverifiable id_token; and the `__Host-` cookies of an https publicUrl.
 *
 * The app is small (test/helpers/login-app.ts: the routes, a MemoryStore, a config from
 * parseConfig), with a test-only `/whoami` that reports `sessions.current()`.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Fastify from 'fastify';
import { decodeJwt } from 'jose';
import type { BrowserContext, Page } from 'playwright-core';
import { parseConfig } from '../../src/config/load.js';
import { cookiePolicy, cookieSecure, loginUrl, safeReturnTo } from '../../src/browser/browser-sessions.js';
import { launchBrowser, watchPage, type BrowserHandle } from '../helpers/browser.js';
import { freePort } from '../helpers/free-port.js';
import { startLoginApp, type LoginApp, type WhoAmI } from '../helpers/login-app.js';
import { startOAuthServer, unsignedToken, type OAuthHandle } from '../helpers/oauth.js';

/** The names with a plain-http loopback publicUrl (browsers refuse `__Host-` without https). */
const SESSION_COOKIE = 'sb_session';
const LOGIN_COOKIE = 'sb_login';
const TEST_TIMEOUT = { timeout: 60_000 };

async function whoami(context: BrowserContext, base: string): Promise<WhoAmI> {
  const res = await context.request.get(`${base}/whoami`);
  assert.equal(res.status(), 200);
  return (await res.json()) as WhoAmI;
}

/** Runs /login in the browser as `sub` and returns where it ended and the callback URL it passed. */
async function signIn(page: Page, base: string, sub: string, returnTo = '/whoami'): Promise<{ callbackUrl: string }> {
  let callbackUrl = '';
  const onRequest = (r: { url(): string }) => {
    if (r.url().startsWith(`${base}/login/callback`)) callbackUrl = r.url();
  };
  page.on('request', onRequest);
  try {
    await page.goto(`${base}/login?returnTo=${encodeURIComponent(returnTo)}&login_hint=${encodeURIComponent(sub)}`);
  } finally {
    page.off('request', onRequest);
  }
  assert.ok(callbackUrl, 'the flow passed through /login/callback');
  return { callbackUrl };
}

/**
 * Starts a sign-in in `context` without finishing it: /login (sets the pre-login cookie in
 * that context) → the authorization server → the callback URL, which is returned unvisited.
 */
async function startSignIn(context: BrowserContext, base: string, sub: string): Promise<string> {
  const login = await context.request.get(`${base}/login?returnTo=/whoami&login_hint=${sub}`, { maxRedirects: 0 });
  assert.equal(login.status(), 303);
  const authorize = await context.request.get(login.headers().location!, { maxRedirects: 0 });
  assert.equal(authorize.status(), 302);
  const callback = authorize.headers().location!;
  assert.ok(callback.startsWith(`${base}/login/callback?`), callback);
  return callback;
}

let oauth: OAuthHandle;
let browser: BrowserHandle;

before(async () => {
  oauth = await startOAuthServer();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await oauth?.stop();
});

describe('sign-in in a browser', () => {
  let login: LoginApp;
  before(async () => {
    login = await startLoginApp({ issuer: oauth.issuer });
  });
  after(() => login?.close());

  test('signs in as the chosen user and returns to returnTo with an HttpOnly, SameSite=Lax session cookie', TEST_TIMEOUT, async () => {
    const page = await browser.newPage();
    const context = page.context();
    try {
      const setCookies: string[] = [];
      page.on('response', async (r) => {
        if (r.url().startsWith(`${login.base}/login`)) {
          const raw = (await r.headersArray()).filter((h) => h.name.toLowerCase() === 'set-cookie').map((h) => h.value);
          setCookies.push(...raw);
        }
      });
      const { callbackUrl } = await signIn(page, login.base, 'alice');
      assert.equal(page.url(), `${login.base}/whoami`);
      const me = JSON.parse((await page.locator('body').innerText()).trim()) as WhoAmI;
      assert.deepEqual(me, { signedIn: true, iss: oauth.issuer, sub: 'alice', label: 'alice' });

      const cookies = await context.cookies(login.base);
      const session = cookies.find((c) => c.name === SESSION_COOKIE);
      assert.ok(session, 'session cookie set');
      assert.equal(session.httpOnly, true);
      assert.equal(session.sameSite, 'Lax');
      assert.equal(session.path, '/');
      assert.equal(session.secure, false, 'plain http on loopback: no Secure (else the browser would drop it)');
      const hours = (session.expires * 1000 - Date.now()) / 3_600_000;
      assert.ok(hours > 7.9 && hours <= 8, `lives 8 h (${hours.toFixed(2)})`);
      const pre = (await context.cookies()).find((c) => c.name === LOGIN_COOKIE); // Path=/login: not sent to /
      assert.ok(pre && pre.httpOnly && pre.path === '/login' && pre.sameSite === 'Lax', 'pre-login cookie is HttpOnly, Lax, only for /login');
      assert.ok(setCookies.some((c) => /^sb_session=[^;]+; Max-Age=28800; Path=\/; HttpOnly; SameSite=Lax$/.test(c)), setCookies.join(' | '));

      // Nothing secret reached the log: not the code, not the state, not the cookie.
      const callback = new URL(callbackUrl);
      const logText = login.logs.join('');
      for (const secret of [callback.searchParams.get('code')!, callback.searchParams.get('state')!, session.value]) {
        assert.ok(!logText.includes(secret), 'not logged');
      }
      assert.match(logText, /browser session started/);
    } finally {
      await context.close();
    }
  });

  test('the authorization request: code + PKCE S256, nonce, state, exact redirect_uri, openid scope', TEST_TIMEOUT, async () => {
    const context = await browser.newContext();
    try {
      const res = await context.request.get(`${login.base}/login?returnTo=/whoami`, { maxRedirects: 0 });
      assert.equal(res.status(), 303);
      assert.equal(res.headers()['cache-control'], 'no-store');
      const url = new URL(res.headers().location!);
      assert.equal(`${url.origin}${url.pathname}`, oauth.authorizationEndpoint);
      const p = url.searchParams;
      assert.equal(p.get('response_type'), 'code');
      assert.equal(p.get('client_id'), 'switchboard-web');
      assert.equal(p.get('redirect_uri'), `${login.base}/login/callback`);
      assert.equal(p.get('code_challenge_method'), 'S256');
      assert.match(p.get('code_challenge')!, /^[A-Za-z0-9_-]{43}$/);
      assert.match(p.get('state')!, /^[A-Za-z0-9_-]{43}$/);
      assert.match(p.get('nonce')!, /^[A-Za-z0-9_-]{43}$/);
      assert.deepEqual(p.get('scope')!.split(' '), ['openid']);
      assert.equal(p.get('prompt'), null);
      assert.equal(p.get('login_hint'), null);

      const hinted = await context.request.get(`${login.base}/login?prompt=login&login_hint=alice%40example.com`, { maxRedirects: 0 });
      const h = new URL(hinted.headers().location!).searchParams;
      assert.equal(h.get('prompt'), 'login', 'sign in again / switch account');
      assert.equal(h.get('login_hint'), 'alice@example.com');
      assert.notEqual(h.get('state'), p.get('state'), 'a fresh state per attempt');
      const junk = await context.request.get(`${login.base}/login?prompt=consent%20none&login_hint=${encodeURIComponent('a b<c>')}`, { maxRedirects: 0 });
      const j = new URL(junk.headers().location!).searchParams;
      assert.equal(j.get('prompt'), null);
      assert.equal(j.get('login_hint'), null);
    } finally {
      await context.close();
    }
  });

  test('a second browser signs in as another user (IdP cookie) without affecting the first', TEST_TIMEOUT, async () => {
    const alice = await browser.newPage();
    const bobContext = await browser.newContext();
    try {
      await signIn(alice, login.base, 'alice');
      await bobContext.addCookies([oauth.subjectCookie('bob')]);
      const bob = await bobContext.newPage();
      await bob.goto(`${login.base}/login?returnTo=/whoami`);
      assert.equal((await whoami(bobContext, login.base)).sub, 'bob');
      assert.equal((await whoami(alice.context(), login.base)).sub, 'alice');
    } finally {
      await alice.context().close();
      await bobContext.close();
    }
  });

  test('a replayed callback (same state) shows an error page and changes nothing', TEST_TIMEOUT, async () => {
    const page = await browser.newPage();
    try {
      const { callbackUrl } = await signIn(page, login.base, 'alice');
      const res = await page.goto(callbackUrl);
      assert.equal(res!.status(), 400);
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Sign-in expired');
      assert.equal(await page.getByRole('link', { name: 'Try again' }).getAttribute('href'), '/login');
      assert.equal((await whoami(page.context(), login.base)).sub, 'alice', 'still the same session');
    } finally {
      await page.context().close();
    }
  });

  test('a state carried to another browser is refused there (also beside a planted pre-login cookie), and still works in the browser that started it', TEST_TIMEOUT, async () => {
    const victim = await browser.newContext();
    const attacker = await browser.newContext();
    try {
      // The attacker starts a sign-in as themselves and sends the callback link to the victim
      // (login CSRF: the victim would be signed in as the attacker).
      const callback = await startSignIn(attacker, login.base, 'mallory');
      const page = await victim.newPage();
      const res = await page.goto(callback);
      assert.equal(res!.status(), 403);
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Sign-in refused');
      assert.match(await page.locator('main').innerText(), /started in a different browser/);
      assert.equal((await whoami(victim, login.base)).signedIn, false, 'the victim is not signed in as mallory');

      // Cookie tossing: the attacker's own pre-login cookie, planted beside the victim's with a
      // longer Path (sent first), binds nothing either: two of them are none.
      const planted = (await attacker.cookies(`${login.base}/login`)).find((c) => c.name === LOGIN_COOKIE)!;
      await startSignIn(victim, login.base, 'alice');
      await victim.addCookies([{ name: LOGIN_COOKIE, value: planted.value, domain: new URL(login.base).hostname, path: '/login/callback' }]);
      assert.equal((await page.goto(callback))!.status(), 403);
      assert.equal((await whoami(victim, login.base)).signedIn, false, 'nor with the planted pre-login cookie');

      const own = await attacker.newPage();
      await own.goto(callback);
      assert.equal(own.url(), `${login.base}/whoami`);
      assert.equal((await whoami(attacker, login.base)).sub, 'mallory', 'the refused attempt did not use the state up');
    } finally {
      await victim.close();
      await attacker.close();
    }
  });

  test('a tampered or forged session cookie is not a session', TEST_TIMEOUT, async () => {
    const page = await browser.newPage();
    const context = page.context();
    try {
      await signIn(page, login.base, 'alice');
      const real = (await context.cookies(login.base)).find((c) => c.name === SESSION_COOKIE)!;
      const [id, mac] = [real.value.slice(0, real.value.lastIndexOf('.')), real.value.slice(real.value.lastIndexOf('.') + 1)];
      const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
      for (const value of [`${flip(id)}.${mac}`, `${id}.${flip(mac)}`, id, `${'x'.repeat(43)}.${mac}`]) {
        await context.clearCookies();
        await context.addCookies([{ name: SESSION_COOKIE, value, url: login.base }]);
        assert.equal((await whoami(context, login.base)).signedIn, false, value);
      }
      await context.addCookies([{ name: SESSION_COOKIE, value: real.value, url: login.base }]);
      assert.equal((await whoami(context, login.base)).sub, 'alice', 'the untouched cookie still works');
    } finally {
      await context.close();
    }
  });

  test('a second session cookie planted with a longer Path (cookie tossing) signs the browser out, though validly signed', TEST_TIMEOUT, async () => {
    const victim = await browser.newPage();
    const attacker = await browser.newPage();
    const context = victim.context();
    try {
      await signIn(victim, login.base, 'alice');
      await signIn(attacker, login.base, 'mallory');
      const mallory = (await attacker.context().cookies(login.base)).find((c) => c.name === SESSION_COOKIE)!;
      // What a sibling host can do without __Host-: its own live session, on longer paths, so
      // the browser sends it before the victim's (RFC 6265 §5.4 step 2).
      const domain = new URL(login.base).hostname;
      await context.addCookies(['/whoami', '/account'].map((path) => ({ name: SESSION_COOKIE, value: mallory.value, domain, path })));
      const sent = await context.request.get(`${login.base}/whoami`);
      assert.equal(sent.status(), 200);
      assert.equal((await sent.json() as WhoAmI).signedIn, false, 'neither mallory nor alice');
      const account = await context.request.get(`${login.base}/account`, { maxRedirects: 0 });
      assert.equal(account.status(), 303, 'a page that needs a session sends the browser to sign in');
      assert.equal(account.headers().location, '/login?returnTo=%2Faccount');
      assert.equal((await whoami(attacker.context(), login.base)).sub, 'mallory', 'one cookie: the session is valid');

      await context.clearCookies({ name: SESSION_COOKIE, path: '/whoami' });
      await context.clearCookies({ name: SESSION_COOKIE, path: '/account' });
      assert.equal((await whoami(context, login.base)).sub, 'alice', 'only its own cookie again: still alice');
    } finally {
      await context.close();
      await attacker.context().close();
    }
  });

  test('sign-out needs the CSRF token (403 without it, also from a form on another origin), then ends the session for good', TEST_TIMEOUT, async () => {
    const evil = Fastify();
    const page = await browser.newPage();
    const context = page.context();
    try {
      await signIn(page, login.base, 'alice');
      const cookie = (await context.cookies(login.base)).find((c) => c.name === SESSION_COOKIE)!;

      for (const form of [{}, { csrf: 'wrong' }, { csrf: '' }] as Array<Record<string, string>>) {
        const res = await context.request.post(`${login.base}/logout`, { form, maxRedirects: 0 });
        assert.equal(res.status(), 403, JSON.stringify(form));
        assert.match(await res.text(), /Sign-out refused/);
      }
      const bare = await context.request.post(`${login.base}/logout`, { maxRedirects: 0 });
      assert.equal(bare.status(), 403, 'no body at all');

      // Another origin of the same site (ports do not make sites): SameSite=Lax sends the
      // cookie along, so the CSRF token is what stops this form.
      evil.get('/', async (_r, reply) =>
        reply.type('text/html').send(`<!doctype html><form method="post" action="${login.base}/logout"><input type="hidden" name="csrf" value="guess"><button>win a prize</button></form>`),
      );
      await evil.listen({ port: 0, host: '127.0.0.1' });
      const evilPage = await context.newPage();
      await evilPage.goto(`http://127.0.0.1:${(evil.server.address() as { port: number }).port}/`);
      const [refused] = await Promise.all([evilPage.waitForResponse(`${login.base}/logout`), evilPage.getByRole('button', { name: 'win a prize' }).click()]);
      assert.equal(refused.status(), 403);
      assert.equal((await whoami(context, login.base)).sub, 'alice', 'still signed in');

      // The real form, in the page that carries the token.
      await page.goto(`${login.base}/account`);
      await Promise.all([page.waitForURL(`${login.base}/login/signed-out`), page.getByRole('button', { name: 'Sign out' }).click()]);
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Signed out');
      assert.equal((await whoami(context, login.base)).signedIn, false);
      assert.equal((await context.cookies(login.base)).find((c) => c.name === SESSION_COOKIE), undefined, 'cookie cleared');

      await context.addCookies([{ name: SESSION_COOKIE, value: cookie.value, url: login.base }]);
      assert.equal((await whoami(context, login.base)).signedIn, false, 'a copy of the old cookie is dead: the session was deleted server-side');
    } finally {
      await context.close();
      await evil.close();
    }
  });

  test('hostile returnTo targets are not followed: the browser lands on /connections of this origin', TEST_TIMEOUT, async () => {
    const page = await browser.newPage();
    const locations: string[] = [];
    page.on('response', (r) => {
      if (r.url().startsWith(`${login.base}/login/callback`)) locations.push(r.headers().location ?? '');
    });
    try {
      const targets = [
        '//evil.example',
        'https://evil.example',
        '/\\evil.example',
        '/\t/evil.example',
        '/\n/evil.example',
        'javascript:alert(1)',
        'whoami',
        // Harmless as given, `//evil.example/x` once dot segments are removed:
        '/.//evil.example/x',
        '/%2e%2e//evil.example/x',
        '/%2E%2e//evil.example/x',
        '/.%2e//evil.example/x',
        '/whoami/../..//evil.example/x',
        '/./\\evil.example/x',
        '/.//\tevil.example/x',
      ];
      for (const target of targets) {
        locations.length = 0;
        // Were a redirect to escape, navigation would fail on DNS: the Location says where to.
        const failed = await page.goto(`${login.base}/login?returnTo=${encodeURIComponent(target)}&login_hint=alice`).then(() => '', (err: Error) => err.message);
        assert.deepEqual(locations, ['/connections'], JSON.stringify(target));
        assert.equal(failed, '');
        assert.equal(page.url(), `${login.base}/connections`, JSON.stringify(target));
      }
      // Encoded slashes and backslashes stay encoded: a path on this origin, not another host.
      for (const target of ['/%2F%2Fevil.example/x', '/.%2F/evil.example', '/%5C%5Cevil.example']) {
        locations.length = 0;
        await page.goto(`${login.base}/login?returnTo=${encodeURIComponent(target)}&login_hint=alice`);
        assert.equal(page.url(), `${login.base}${target}`, target);
        assert.deepEqual(locations, [target]);
      }
      await page.goto(`${login.base}/login?returnTo=${encodeURIComponent('/whoami?x=1')}&login_hint=alice`);
      assert.equal(page.url(), `${login.base}/whoami?x=1`, 'a same-origin path with a query is kept');
    } finally {
      await page.context().close();
    }
  });

  test('a refused sign-in (error=access_denied) shows a page with a way back, and signs nobody in', TEST_TIMEOUT, async () => {
    const context = await browser.newContext();
    try {
      await context.addCookies([oauth.errorCookie('access_denied')]);
      const page = await context.newPage();
      const { problems } = watchPage(page);
      const res = await page.goto(`${login.base}/login?returnTo=/whoami`);
      assert.equal(res!.status(), 403);
      assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Sign-in cancelled');
      assert.equal(await page.getByRole('link', { name: 'Try again' }).getAttribute('href'), '/login?returnTo=%2Fwhoami');
      assert.equal((await whoami(context, login.base)).signedIn, false);
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });

  test('a callback without or with an unknown state is an error page', TEST_TIMEOUT, async () => {
    for (const query of ['', '?code=abc', '?state=nonexistent&code=abc', '?state=%3Cscript%3E']) {
      const res = await login.app.inject({ method: 'GET', url: `/login/callback${query}` });
      assert.equal(res.statusCode, 400, query);
      assert.match(res.headers['content-type'] as string, /^text\/html/);
      assert.ok(!res.body.includes('<script>'));
    }
  });
});

describe('sign-in configuration and failures', () => {
  test('without auth.login, /login and the callback answer 503 "sign-in not configured"', TEST_TIMEOUT, async () => {
    const app = await startLoginApp({ issuer: oauth.issuer, login: null, listen: false });
    try {
      for (const url of ['/login?returnTo=/x', '/login/callback?state=a&code=b']) {
        const res = await app.app.inject({ method: 'GET', url });
        assert.equal(res.statusCode, 503);
        assert.match(res.body, /<h1>Sign-in is not configured<\/h1>/);
        assert.equal(res.headers['x-frame-options'], 'DENY');
      }
    } finally {
      await app.close();
    }
  });

  test('https publicUrl: __Host-sb_login and __Host-sb_session (Secure, Path=/, no Domain); one of each name or no session', TEST_TIMEOUT, async () => {
    const app = await startLoginApp({ issuer: oauth.issuer, publicUrl: 'https://mcp.example.com', listen: false });
    try {
      const start = await app.app.inject({ method: 'GET', url: '/login?returnTo=/whoami&login_hint=alice' });
      assert.equal(start.statusCode, 303);
      const setLogin = String(start.headers['set-cookie']);
      assert.match(setLogin, /^__Host-sb_login=[^;]+; Max-Age=600; Path=\/; HttpOnly; SameSite=Lax; Secure$/);
      const authorize = new URL(start.headers.location as string);
      assert.equal(authorize.searchParams.get('redirect_uri'), 'https://mcp.example.com/login/callback');
      const atIssuer = await fetch(authorize, { redirect: 'manual', signal: AbortSignal.timeout(5_000) });
      const back = new URL(atIssuer.headers.get('location')!);
      assert.equal(`${back.origin}${back.pathname}`, 'https://mcp.example.com/login/callback');
      const callback = back.pathname + back.search;
      const preLogin = setLogin.slice(0, setLogin.indexOf(';'));

      for (const cookie of [`${preLogin}; ${preLogin}`, preLogin.replace('__Host-', '')]) {
        const refused = await app.app.inject({ method: 'GET', url: callback, headers: { cookie } });
        assert.equal(refused.statusCode, 403, `${cookie.length} bytes of pre-login cookies`);
      }
      const done = await app.app.inject({ method: 'GET', url: callback, headers: { cookie: preLogin } });
      assert.equal(done.statusCode, 303);
      assert.equal(done.headers.location, '/whoami');
      const setSession = String(done.headers['set-cookie']);
      assert.match(setSession, /^__Host-sb_session=[^;]+; Max-Age=28800; Path=\/; HttpOnly; SameSite=Lax; Secure$/);

      const session = setSession.slice(0, setSession.indexOf(';'));
      const who = async (cookie: string) => (await app.app.inject({ method: 'GET', url: '/whoami', headers: { cookie } })).json<WhoAmI>();
      assert.equal((await who(session)).sub, 'alice');
      assert.equal((await who(`other=1; ${session}; ${preLogin}`)).sub, 'alice', 'other cookies do not matter');
      assert.equal((await who(session.replace('__Host-', ''))).signedIn, false, 'the unprefixed name is not read');
      assert.equal((await who(`${session}; ${session}`)).signedIn, false, 'the same name twice');

      const out = await app.app.inject({ method: 'POST', url: '/logout' });
      assert.equal(out.headers['set-cookie'], '__Host-sb_session=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax; Secure');
      for (const header of [setLogin, setSession]) assert.doesNotMatch(header, /domain/i);
    } finally {
      await app.close();
    }
  });

  test('cookie names and attributes per publicUrl: __Host- exactly when https; Secure except on plain-http loopback', () => {
    const config = parseConfig({ publicUrl: 'http://127.0.0.1:8080', auth: { issuer: 'http://127.0.0.1:9', audience: 'a' }, backends: [{ name: 'demo', url: 'http://127.0.0.1:9/mcp' }] });
    const hostOnly = { session: '__Host-sb_session', login: '__Host-sb_login', loginPath: '/', secure: true };
    for (const [url, policy] of [
      ['http://localhost:8080', { session: 'sb_session', login: 'sb_login', loginPath: '/login', secure: false }],
      ['http://127.0.0.1', { session: 'sb_session', login: 'sb_login', loginPath: '/login', secure: false }],
      ['http://[::1]:3000', { session: 'sb_session', login: 'sb_login', loginPath: '/login', secure: false }],
      ['http://mcp.internal', { session: 'sb_session', login: 'sb_login', loginPath: '/login', secure: true }],
      ['https://localhost', hostOnly],
      ['https://mcp.example.com', hostOnly],
    ] as const) {
      assert.deepEqual(cookiePolicy({ ...config, publicUrl: url }), policy, url);
      assert.equal(cookieSecure({ ...config, publicUrl: url }), policy.secure, url);
    }
  });

  test('returnTo accepts same-origin paths only, judged after normalization', () => {
    assert.equal(safeReturnTo('/connect?elicitationId=abc'), '/connect?elicitationId=abc');
    for (const bad of [undefined, 42, '', '//evil.example', '/\\evil', '/\t/evil', 'https://evil.example/', 'evil', '/x\u0000y', `/${'a'.repeat(3000)}`]) {
      assert.equal(safeReturnTo(bad), '/connections', JSON.stringify(bad));
    }
    const dotSegments = ['/.//evil.example/x', '/%2e%2e//evil.example/x', '/%2E%2E//evil.example/x', '/.%2e//evil.example/x', '/%2e/%2e//evil', '/a/../..//evil.example', '/./../.././/evil', '/./\\evil.example', '/.//\tevil', '/\r/evil'];
    for (const bad of dotSegments) assert.equal(safeReturnTo(bad), '/connections', JSON.stringify(bad));
    assert.equal(safeReturnTo('/.//evil.example/x', '/account'), '/account', 'the given fallback');
    // 1001 characters given, 6001 once percent-encoded: the bound holds for what is returned.
    assert.equal(safeReturnTo(`/${'é'.repeat(1000)}`), '/connections');
    assert.equal(safeReturnTo(`/${'é'.repeat(300)}`), `/${'%C3%A9'.repeat(300)}`);
    // Normalized, and still on this origin:
    for (const [given, kept] of [
      ['/', '/'],
      ['/a/./b/../c?x=//y', '/a/c?x=//y'],
      ['/whoami#fragment', '/whoami'],
      ['/%2F%2Fevil.example', '/%2F%2Fevil.example'],
      ['/%5C%5Cevil.example', '/%5C%5Cevil.example'],
    ] as const) {
      assert.equal(safeReturnTo(given), kept, given);
    }
    assert.equal(loginUrl('//evil.example'), '/login?returnTo=%2Fconnections');
    assert.equal(loginUrl('/connect?elicitationId=a&b=c'), '/login?returnTo=%2Fconnect%3FelicitationId%3Da%26b%3Dc');
  });

  test('a failing token endpoint or an unverifiable id_token ends on an error page; nobody is signed in', TEST_TIMEOUT, async () => {
    // A stand-in authorization server whose /authorize works and whose /token misbehaves.
    let tokenMode: 'down' | 'unsigned' = 'down';
    const idp = Fastify();
    idp.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_r, body, done) => done(null, body));
    let issuer = '';
    idp.get('/.well-known/openid-configuration', async () => ({
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: oauth.jwksUri,
    }));
    idp.get('/authorize', async (request, reply) => {
      const q = request.query as Record<string, string>;
      const back = new URL(q.redirect_uri!);
      back.searchParams.set('code', 'code-1');
      back.searchParams.set('state', q.state!);
      return reply.code(302).header('location', back.href).send();
    });
    idp.post('/token', async (_request, reply) => {
      if (tokenMode === 'down') return reply.code(503).send({ error: 'temporarily_unavailable' });
      const now = Math.floor(Date.now() / 1000);
      return { access_token: 'at', token_type: 'Bearer', id_token: unsignedToken({ iss: issuer, sub: 'mallory', aud: 'switchboard-web', iat: now, exp: now + 600 }) };
    });
    await idp.listen({ port: 0, host: '127.0.0.1' });
    issuer = `http://127.0.0.1:${(idp.server.address() as { port: number }).port}`;
    const app = await startLoginApp({ issuer });
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      for (const mode of ['down', 'unsigned'] as const) {
        tokenMode = mode;
        const res = await page.goto(`${app.base}/login?returnTo=/whoami`);
        assert.equal(res!.status(), 502, mode);
        assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Sign-in failed');
        assert.equal(await page.getByRole('link', { name: 'Try again' }).getAttribute('href'), '/login?returnTo=%2Fwhoami');
        assert.ok(!(await page.content()).includes('    at '), 'no stack');
        assert.equal((await whoami(context, app.base)).signedIn, false, mode);
      }
      assert.match(app.logs.join(''), /token endpoint answered HTTP 503 \(temporarily_unavailable\)/);
      assert.match(app.logs.join(''), /id_token rejected/);
    } finally {
      await context.close();
      await app.close();
      await idp.close();
    }
  });

  test('an unreachable issuer gives a 503 page at /login, and sign-in works once it is back', TEST_TIMEOUT, async () => {
    const port = await freePort();
    const issuer = `http://127.0.0.1:${port}`;
    const app = await startLoginApp({ issuer, listen: false });
    const idp = Fastify();
    try {
      const down = await app.app.inject({ method: 'GET', url: '/login' });
      assert.equal(down.statusCode, 503);
      assert.match(down.body, /<h1>Sign-in unavailable<\/h1>/);
      idp.get('/.well-known/openid-configuration', async () => ({ issuer, authorization_endpoint: `${issuer}/a`, token_endpoint: `${issuer}/t`, jwks_uri: `${issuer}/j` }));
      await idp.listen({ port, host: '127.0.0.1' });
      const up = await app.app.inject({ method: 'GET', url: '/login' });
      assert.equal(up.statusCode, 303, 'a failed discovery is not cached');
      assert.ok((up.headers.location as string).startsWith(`${issuer}/a?`));
    } finally {
      await app.close();
      await idp.close();
    }
  });
});

describe('OAuth fixture: choosing the signed-in user', () => {
  /** Authorization code + PKCE straight against the fixture; returns the token response. */
  async function codeFlow(extra: Record<string, string>, cookie?: string): Promise<Record<string, string>> {
    const verifier = randomBytes(32).toString('base64url');
    const authorize = new URL(oauth.authorizationEndpoint);
    const params = {
      response_type: 'code',
      client_id: 'web',
      redirect_uri: 'http://127.0.0.1:9/cb',
      state: 's',
      nonce: 'n',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      ...extra,
    };
    for (const [k, v] of Object.entries(params)) authorize.searchParams.set(k, v);
    const res = await fetch(authorize, { redirect: 'manual', headers: cookie ? { cookie } : {}, signal: AbortSignal.timeout(5_000) });
    const back = new URL(res.headers.get('location')!);
    if (back.searchParams.has('error')) return { error: back.searchParams.get('error')!, state: back.searchParams.get('state')! };
    const token = await fetch(oauth.tokenEndpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code')!, redirect_uri: params.redirect_uri, code_verifier: verifier, client_id: 'web' }),
      signal: AbortSignal.timeout(5_000),
    });
    assert.equal(token.status, 200);
    return (await token.json()) as Record<string, string>;
  }

  test('login_hint (or the port-qualified cookie) becomes sub of the id_token, access token, refreshed tokens and /userinfo', TEST_TIMEOUT, async () => {
    const byHint = await codeFlow({ login_hint: 'carol' });
    assert.equal(decodeJwt(byHint.id_token!).sub, 'carol');
    assert.equal(decodeJwt(byHint.id_token!).nonce, 'n');
    assert.equal(decodeJwt(byHint.access_token!).sub, 'carol');
    const info = await fetch(`${oauth.issuer}/userinfo`, { headers: { authorization: `Bearer ${byHint.access_token}` } });
    assert.equal(((await info.json()) as { sub: string }).sub, 'carol');
    const refreshed = await fetch(oauth.tokenEndpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: byHint.refresh_token!, client_id: 'web' }),
    });
    assert.equal(decodeJwt(((await refreshed.json()) as { access_token: string }).access_token).sub, 'carol');

    const c = oauth.subjectCookie('dave@example.com');
    const byCookie = await codeFlow({}, `${c.name}=${c.value}`);
    assert.equal(decodeJwt(byCookie.id_token!).sub, 'dave@example.com');
    assert.equal(decodeJwt((await codeFlow({ login_hint: 'erin' }, `${c.name}=${c.value}`)).id_token!).sub, 'erin', 'the hint wins');
    assert.equal(decodeJwt((await codeFlow({}, `mock_sub_1=${c.value}`)).id_token!).sub, 'johndoe', "another server's cookie is ignored");
    assert.equal(decodeJwt((await codeFlow({})).id_token!).sub, 'johndoe', 'default unchanged');

    const e = oauth.errorCookie('access_denied');
    assert.deepEqual(await codeFlow({}, `${e.name}=${e.value}`), { error: 'access_denied', state: 's' });
  });
});
