/**
 * The browser pages (SPEC §4; issue 3 "pages are server-rendered HTML, small, accessible,
 * readable on a phone, with no third-party assets"): hostile text is escaped, every response
 * carries the security headers, the CSP hash really matches the inline style, and — rendered
 * in Chromium at phone width — nothing is blocked or reported, nothing scrolls sideways,
 * every button has an accessible name, focus is visible and text has enough contrast.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Page as BrowserPage } from 'playwright-core';
import { registerFormParser } from '../../src/browser/browser-sessions.js';
import {
  connectedPage,
  connectionsPage,
  consentPage,
  CSRF_FIELD,
  declinedPage,
  errorPage,
  refusalPage,
  sendPage,
  setPageErrorHandler,
  signedOutPage,
  type Page,
} from '../../src/browser/pages.js';
import { launchBrowser, watchPage, type BrowserHandle } from '../helpers/browser.js';

const EVIL = `<script>alert(1)</script>"'&<img src=x>`;
const LONG = 'x'.repeat(300);

function allPages(evil: string): Record<string, Page> {
  return {
    consent: consentPage({
      serverName: `Server ${evil}`,
      provider: `github${evil}`,
      scopes: ['repo', `read:${evil}`, LONG],
      accountLabel: `alice ${evil}`,
      elicitationId: `el-${evil}`,
      csrfToken: `tok-${evil}`,
      message: `Please connect ${evil}`,
    }),
    refusal: refusalPage({ title: `Wrong account ${evil}`, reason: `This link was created for a different account ${evil}`, signOutCsrfToken: `tok-${evil}` }),
    connected: connectedPage({ provider: `github${evil}`, serverName: `Server ${evil}` }),
    declined: declinedPage({ provider: `github${evil}` }),
    error: errorPage({ status: 502, title: `Failed ${evil}`, detail: `Detail ${evil} ${LONG}`, retryUrl: `/login?returnTo=${encodeURIComponent(evil)}` }),
    connections: connectionsPage({
      accountLabel: `alice ${evil}`,
      csrfToken: `tok-${evil}`,
      connections: [
        { provider: 'github', status: 'connected', expiresAt: Date.UTC(2030, 0, 1) },
        { provider: `linear${evil}`, status: 'expired', expiresAt: Date.UTC(2020, 0, 1) },
        { provider: 'notion', status: 'not connected' },
      ],
    }),
    signedOut: signedOutPage(),
  };
}

const inlineStyle = (html: string) => {
  const m = /<style>([\s\S]*?)<\/style>/.exec(html);
  assert.ok(m, 'page has an inline style');
  return m[1]!;
};

describe('page rendering', () => {
  test('/connections says a link that refreshes by itself does so, and when one that does not ends (issue 46 §7)', () => {
    const { html } = connectionsPage({
      accountLabel: 'Alice Example',
      csrfToken: 't',
      connections: [
        { provider: 'github', status: 'connected', expiresAt: Date.UTC(2030, 0, 1), refreshes: true },
        { provider: 'notion', status: 'connected', expiresAt: Date.UTC(2030, 0, 1) },
        { provider: 'linear', status: 'expired', expiresAt: Date.UTC(2020, 0, 1) },
      ],
    });
    const row = (provider: string) => html.slice(html.indexOf(`<strong>${provider}</strong>`)).split('</li>')[0]!;
    assert.match(row('github'), /Connected<\/span> <span class="muted">· refreshes by itself<\/span>/);
    assert.ok(!row('github').includes('valid until'), 'not the access token\'s expiry');
    assert.match(row('notion'), /valid until <time datetime="2030-01-01T00:00:00.000Z">[^<]+<\/time>, then connect again/);
    assert.match(row('linear'), /expired <time/);
    assert.match(html, /Signed in as <strong>Alice Example<\/strong>/);
  });

  test('hostile text is escaped everywhere and never becomes markup', () => {
    for (const [name, page] of Object.entries(allPages(EVIL))) {
      assert.ok(!page.html.includes('<script'), `${name}: no <script>`);
      assert.ok(!page.html.includes('<img'), `${name}: no injected element`);
      assert.ok(!/<[^>]*\son\w+\s*=/i.test(page.html), `${name}: no inline event handlers`);
      if (name !== 'signedOut') assert.ok(page.html.includes('&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;'), `${name}: the text is shown, escaped`);
      assert.ok(!/(src|href)="https?:/i.test(page.html), `${name}: no third-party assets`);
      assert.match(page.html, /^<!doctype html><html lang="en">/);
      assert.match(page.html, /<meta name="viewport" content="width=device-width, initial-scale=1">/);
      assert.equal((page.html.match(/<h1>/g) ?? []).length, 1, `${name}: one h1`);
    }
  });

  test('every page carries the security headers and a CSP whose hash is the inline style', () => {
    for (const [name, page] of Object.entries(allPages('plain'))) {
      const h = page.headers;
      assert.equal(h['content-type'], 'text/html; charset=utf-8');
      assert.equal(h['x-frame-options'], 'DENY');
      assert.equal(h['referrer-policy'], 'same-origin');
      assert.equal(h['cache-control'], 'no-store');
      assert.equal(h['x-content-type-options'], 'nosniff');
      const csp = h['content-security-policy']!;
      const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k!, v]));
      assert.deepEqual(directives.get('default-src'), ["'none'"], name);
      assert.deepEqual(directives.get('frame-ancestors'), ["'none'"], name);
      assert.deepEqual(directives.get('base-uri'), ["'none'"], name);
      assert.deepEqual(directives.get('form-action'), ["'self'"], name);
      assert.ok(!directives.has('script-src'), `${name}: no scripts allowed`);
      const hash = createHash('sha256').update(inlineStyle(page.html), 'utf8').digest('base64');
      assert.deepEqual(directives.get('style-src'), [`'sha256-${hash}'`], `${name}: style-src is exactly the style's hash`);
    }
  });

  test('consent: a CSRF-protected POST /connect with the elicitation and both actions; says who, what and which scopes', () => {
    const page = consentPage({ serverName: 'Acme MCP', provider: 'github', scopes: ['repo', 'read:user'], accountLabel: 'alice', elicitationId: 'el-1', csrfToken: 'tok-1' });
    assert.equal(page.status, 200);
    const form = /<form method="post" action="\/connect">([\s\S]*?)<\/form>/.exec(page.html);
    assert.ok(form, 'a POST form to /connect');
    assert.match(form[1]!, /<input type="hidden" name="elicitationId" value="el-1">/);
    assert.match(form[1]!, new RegExp(`<input type="hidden" name="${CSRF_FIELD}" value="tok-1">`));
    assert.match(form[1]!, /<button type="submit"[^>]* name="action" value="continue">Continue to github<\/button>/);
    assert.match(form[1]!, /<button type="submit"[^>]* name="action" value="cancel">Cancel<\/button>/);
    for (const text of ['Acme MCP', 'github', 'alice', '<code>repo</code>', '<code>read:user</code>']) assert.ok(page.html.includes(text), text);
  });

  test('connections: formActions (the providers Connect redirects to) go into form-action', () => {
    const page = connectionsPage({ accountLabel: 'a', csrfToken: 't', connections: [{ provider: 'notion', status: 'not connected' }], formActions: ['https://api.notion.com/v1/oauth/authorize'] });
    assert.match(page.headers['content-security-policy']!, /form-action 'self' https:\/\/api\.notion\.com;/);
    assert.match(connectionsPage({ accountLabel: 'a', csrfToken: 't', connections: [] }).headers['content-security-policy']!, /form-action 'self';/);
  });

  test('consent: formActions adds the provider origin to form-action (the 303 after Continue goes there); nothing else gets in', () => {
    const page = consentPage({
      serverName: 's',
      provider: 'github',
      scopes: [],
      accountLabel: 'a',
      elicitationId: 'e',
      csrfToken: 't',
      formActions: ['https://github.com/login/oauth/authorize?x=1', 'javascript:alert(1)', 'not a url', "https://x.example/'none'"],
    });
    assert.match(page.headers['content-security-policy']!, /form-action 'self' https:\/\/github\.com https:\/\/x\.example;/);
    assert.ok(page.html.includes('No specific permissions are requested'));
  });

  test('statuses; retry links only to this origin or http(s); connections: Connect for what is not usable, Disconnect for what is stored', () => {
    assert.equal(refusalPage({ title: 't', reason: 'r' }).status, 403);
    assert.ok(!refusalPage({ title: 't', reason: 'r' }).html.includes('<form'), 'no sign-out form unless asked');
    assert.match(refusalPage({ title: 't', reason: 'r', signOutCsrfToken: 'k' }).html, new RegExp(`<form method="post" action="/logout"[^>]*>\\s*<input type="hidden" name="${CSRF_FIELD}" value="k">`));
    assert.equal(errorPage({ status: 400, title: 't', detail: 'd' }).status, 400);
    assert.equal(connectedPage({ provider: 'p', serverName: 's' }).status, 200);
    assert.equal(declinedPage({ provider: 'p' }).status, 200);
    for (const bad of ['javascript:alert(1)', '//evil.example/x', '/\\evil.example', 'data:text/html,x']) {
      assert.ok(!errorPage({ status: 400, title: 't', detail: 'd', retryUrl: bad }).html.includes('Try again'), bad);
    }
    assert.match(errorPage({ status: 400, title: 't', detail: 'd', retryUrl: '/login?returnTo=%2Fx' }).html, /href="\/login\?returnTo=%2Fx"/);

    const html = allPages('<b>').connections!.html;
    const forms = [...html.matchAll(/<form method="post" action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/g)];
    const linear = encodeURIComponent('linear<b>');
    assert.deepEqual(
      forms.map((f) => f[1]),
      ['/connections/github/disconnect', `/connections/${linear}/connect`, `/connections/${linear}/disconnect`, '/connections/notion/connect', '/logout'],
      'connected: Disconnect; expired: Connect and Disconnect; not connected: Connect; sign-out',
    );
    for (const f of forms) assert.match(f[2]!, new RegExp(`name="${CSRF_FIELD}" value="tok-&lt;b&gt;"`));
    assert.match(html, /<button type="submit" class="primary" aria-label="Connect notion">Connect<\/button>/);
    assert.match(html, /<time datetime="2030-01-01T00:00:00.000Z">2030-01-01 00:00 UTC<\/time>/);
  });
});

describe('form scope', () => {
  let app: FastifyInstance;
  before(async () => {
    app = Fastify();
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_r, body, done) => done(null, body));
    app.setErrorHandler((_e, _r, reply) => reply.code(500).send({ jsonrpc: '2.0' }));
    app.register(async (scope) => {
      registerFormParser(scope);
      setPageErrorHandler(scope);
      scope.post('/form', async (request) => ({ body: request.body, proto: Object.getPrototypeOf(request.body) === null }));
      scope.get('/boom', async () => {
        throw new Error('secret internal detail');
      });
      scope.get('/page', async (_r, reply) => sendPage(reply, declinedPage({ provider: 'github' })));
    });
    await app.ready();
  });
  after(() => app.close());

  test('urlencoded forms parse to a flat record (first value wins, no prototype)', async () => {
    const res = await app.inject({ method: 'POST', url: '/form', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a=1&a=2&__proto__=x&b=%3Cs%3E' });
    assert.equal(res.statusCode, 200);
    const json = res.json() as { body: Record<string, string>; proto: boolean };
    assert.equal(json.proto, true);
    assert.deepEqual({ ...json.body }, { a: '1', ['__proto__']: 'x', b: '<s>' });
  });

  test('errors in the scope answer with HTML error pages, never a stack or JSON', async () => {
    const big = await app.inject({ method: 'POST', url: '/form', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `a=${'x'.repeat(20_000)}` });
    assert.equal(big.statusCode, 413);
    assert.match(big.headers['content-type'] as string, /^text\/html/);
    assert.equal(big.headers['x-frame-options'], 'DENY');
    const odd = await app.inject({ method: 'POST', url: '/form', headers: { 'content-type': 'text/plain' }, payload: 'x' });
    assert.equal(odd.statusCode, 415);
    assert.match(odd.body, /<h1>Bad request<\/h1>/);
    const boom = await app.inject({ method: 'GET', url: '/boom' });
    assert.equal(boom.statusCode, 500);
    assert.ok(!boom.body.includes('secret internal detail') && !boom.body.includes('at '), 'no message, no stack');
    assert.match(boom.body, /Something went wrong/);
  });

  test('sendPage writes status, headers and the document', async () => {
    const res = await app.inject({ method: 'GET', url: '/page' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.match(res.body, /<h1>Connection cancelled<\/h1>/);
  });
});

describe('pages in Chromium', () => {
  let browser: BrowserHandle;
  let app: FastifyInstance;
  let provider: FastifyInstance;
  let base: string;
  let providerOrigin: string;
  let lastPost: Record<string, string> | undefined;

  before(async () => {
    provider = Fastify();
    provider.get('/authorize', async (_r, reply) => sendPage(reply, declinedPage({ provider: 'at the provider' })));
    await provider.listen({ port: 0, host: '127.0.0.1' });
    providerOrigin = `http://127.0.0.1:${(provider.server.address() as { port: number }).port}`;

    app = Fastify();
    const pages = allPages(EVIL);
    app.register(async (scope) => {
      registerFormParser(scope);
      setPageErrorHandler(scope);
      for (const [name, page] of Object.entries(pages)) scope.get(`/${name}`, async (_r, reply) => sendPage(reply, page));
      const consent = (formActions?: string[]) =>
        consentPage({ serverName: 'Acme', provider: 'github', scopes: ['repo'], accountLabel: 'alice', elicitationId: 'el-42', csrfToken: 'tok-42', ...(formActions ? { formActions } : {}) });
      scope.get('/consent-to-provider', async (_r, reply) => sendPage(reply, consent([`${providerOrigin}/authorize`])));
      scope.get('/consent-self-only', async (_r, reply) => sendPage(reply, consent()));
      scope.post('/connect', async (request, reply) => {
        lastPost = { ...(request.body as Record<string, string>) };
        return reply.code(303).header('location', `${providerOrigin}/authorize`).send();
      });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await provider?.close();
  });

  async function open(path: string): Promise<{ page: BrowserPage; problems: string[] }> {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 360, height: 740 });
    const { problems } = watchPage(page);
    const res = await page.goto(`${base}${path}`, { waitUntil: 'load' });
    assert.ok(res, 'navigated');
    return { page, problems };
  }

  /**
   * Every visible element with its own text: foreground vs. the first opaque background behind
   * it (WCAG relative luminance). A string, not a function: tsx would add helpers to a function
   * that do not exist in the page.
   */
  const CONTRAST_CHECK = `(() => {
    const parse = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
    const channel = (v) => { const s = v / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
    const lum = (rgb) => 0.2126 * channel(rgb[0]) + 0.7152 * channel(rgb[1]) + 0.0722 * channel(rgb[2]);
    const background = (el) => {
      for (let e = el; e; e = e.parentElement) {
        const c = parse(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c;
      }
      return [255, 255, 255];
    };
    const bad = [];
    for (const el of document.body.querySelectorAll('*')) {
      const ownText = [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
      if (!ownText || el.getClientRects().length === 0) continue;
      const fg = lum(parse(getComputedStyle(el).color));
      const bg = lum(background(el));
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      if (ratio < 4.5) bad.push(el.tagName + '.' + el.className + ': ' + ratio.toFixed(2));
    }
    return bad;
  })()`;
  const lowContrast = (page: BrowserPage) => page.evaluate<string[]>(CONTRAST_CHECK);

  for (const name of ['consent', 'refusal', 'connected', 'declined', 'error', 'connections', 'signedOut']) {
    test(`${name}: renders under its CSP at 360 px, no sideways scroll, named buttons, visible focus, AA contrast`, async () => {
      const { page, problems } = await open(`/${name}`);
      try {
        // The hash-allowed stylesheet applied (main is capped at 36rem, body uses the system font stack).
        assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector('main')!).maxWidth), '576px');
        assert.equal(await page.evaluate(() => document.querySelectorAll('script, img, iframe').length), 0);
        assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 360), 'no horizontal scroll at 360 px');
        assert.equal(await page.evaluate(() => document.documentElement.lang), 'en');
        assert.equal(await page.getByRole('heading', { level: 1 }).count(), 1);

        const snapshot = await page.locator('body').ariaSnapshot();
        const buttons = snapshot.split('\n').filter((l) => /^\s*- (button|link)\b/.test(l));
        for (const line of buttons) assert.match(line, /- (button|link) "[^"]+"/, `accessible name: ${line}`);

        const controls = await page.locator('button, a').count();
        if (controls > 0) {
          await page.keyboard.press('Tab');
          const outline = await page.evaluate(() => {
            const s = getComputedStyle(document.activeElement!);
            return `${s.outlineStyle} ${s.outlineWidth}`;
          });
          assert.equal(outline, 'solid 3px', 'keyboard focus is visible');
        }
        assert.deepEqual(await lowContrast(page), [], 'text contrast at least 4.5:1');
        await page.waitForTimeout(100);
        assert.deepEqual(problems, [], 'no console errors or CSP violations');
      } finally {
        await page.context().close();
      }
    });
  }

  test('consent buttons are named; Continue posts elicitationId, CSRF token and action, and the 303 to the provider is allowed', async () => {
    const { page, problems } = await open('/consent-to-provider');
    try {
      assert.equal(await page.getByRole('button', { name: 'Continue to github' }).count(), 1);
      assert.equal(await page.getByRole('button', { name: 'Cancel' }).count(), 1);
      await Promise.all([page.waitForURL(`${providerOrigin}/authorize`), page.getByRole('button', { name: 'Continue to github' }).click()]);
      assert.deepEqual(lastPost, { elicitationId: 'el-42', [CSRF_FIELD]: 'tok-42', action: 'continue' });
      assert.deepEqual(problems, []);
    } finally {
      await page.context().close();
    }
  });

  test("without formActions the browser blocks the 303 to another origin (why consentPage takes the provider's origin)", async () => {
    const { page, problems } = await open('/consent-self-only');
    try {
      lastPost = undefined;
      await page.getByRole('button', { name: 'Cancel' }).click();
      const deadline = Date.now() + 5_000;
      while (!problems.some((p) => p.includes('form-action')) && Date.now() < deadline) await page.waitForTimeout(50);
      assert.ok(problems.some((p) => p.includes('form-action')), `a form-action violation is reported: ${problems.join(' | ')}`);
      assert.ok(!page.url().startsWith(providerOrigin), 'did not reach the provider');
    } finally {
      await page.context().close();
    }
  });
});
