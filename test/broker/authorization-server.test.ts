/**
 * The broker's authorization server at its edges (issue 19, SPEC §8), on one in-process
 * gateway with a real upstream IdP, a real backend and real Chromium: what the metadata
 * promises, what an authorization request must carry (PKCE S256, a resource the gateway
 * serves), which tokens the MCP endpoints take in broker mode (the broker's own, signed by any
 * configured key; never the IdP's, never one that is not an access token), the consent page's
 * Deny and its CSRF token, and the switches that turn registration and documents off.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { importPKCS8, SignJWT } from 'jose';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { authorizationRequest, ecPem, startCallbackServer, type CallbackServer } from './support.js';

const KEYS = [ecPem(), ecPem()];
let oauth: OAuthHandle;
let everything: EverythingHandle;
let browser: BrowserHandle;
let callback: CallbackServer;
let gateway: GatewayHandle;

async function startBroker(broker: Record<string, unknown> = {}): Promise<GatewayHandle> {
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  return startGateway({
    port,
    issuer: oauth.issuer,
    backends: [{ name: 'everything', url: everything.url }],
    overrides: {
      auth: {
        mode: 'broker',
        issuer: oauth.issuer,
        audience: `${publicUrl}/mcp`,
        scopes: ['mcp'],
        login: { clientId: 'switchboard' },
        broker: { signingKeys: KEYS, ...broker },
      },
      secrets: { cookieKey: 'c'.repeat(40), tokenKey: 't'.repeat(40) },
    },
  });
}

before(async () => {
  [oauth, everything, browser, callback] = await Promise.all([startOAuthServer(), startEverything(), launchBrowser(), startCallbackServer()]);
  gateway = await startBroker();
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([browser?.close(), callback?.close(), everything?.stop(), oauth?.stop()]);
});

const json = async (url: string) => (await (await fetch(url)).json()) as Record<string, unknown>;

async function register(base: string): Promise<string> {
  const res = await fetch(`${base}/oauth2/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Edge Client', redirect_uris: [callback.url], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  assert.equal(res.status, 201);
  return ((await res.json()) as { client_id: string }).client_id;
}

function authorizeUrl(clientId: string, params: Record<string, string | undefined> = {}): string {
  return authorizationRequest(gateway.url, { clientId, redirectUri: callback.url, backend: 'everything' }, params).url;
}

/** Where the authorization endpoint sends the browser, without following it. */
async function authorizeRedirect(clientId: string, params: Record<string, string | undefined> = {}): Promise<URL> {
  const res = await fetch(authorizeUrl(clientId, params), { redirect: 'manual' });
  assert.equal(res.status, 303);
  return new URL(res.headers.get('location')!, gateway.url);
}

async function mintWith(pem: string, kid: string, claims: Record<string, unknown>, typ = 'at+jwt'): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid, typ })
    .setIssuer(gateway.url)
    .setSubject('carol')
    .setAudience(`${gateway.url}/mcp/everything`)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(await importPKCS8(pem, 'ES256'));
}

async function initializeStatus(token: string): Promise<number> {
  const res = await fetch(gateway.endpoint('everything'), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  });
  await res.body?.cancel();
  return res.status;
}

describe('metadata', () => {
  test('RFC 8414 at /.well-known/oauth-authorization-server: issuer publicUrl, code + PKCE S256 only, registration, revocation, documents, auth.scopes', async () => {
    const m = await json(`${gateway.url}/.well-known/oauth-authorization-server`);
    assert.equal(m.issuer, gateway.url);
    assert.deepEqual(m.response_types_supported, ['code']);
    assert.deepEqual(m.code_challenge_methods_supported, ['S256']);
    assert.deepEqual(m.grant_types_supported, ['authorization_code', 'refresh_token']);
    assert.equal(m.authorization_endpoint, `${gateway.url}/oauth2/authorize`);
    assert.equal(m.token_endpoint, `${gateway.url}/oauth2/token`);
    assert.equal(m.registration_endpoint, `${gateway.url}/oauth2/register`);
    assert.equal(m.revocation_endpoint, `${gateway.url}/oauth2/revoke`);
    assert.equal(m.client_id_metadata_document_supported, true);
    assert.ok((m.scopes_supported as string[]).includes('mcp'));
  });

  test('RFC 9728: every MCP endpoint names publicUrl as its authorization server', async () => {
    for (const path of ['', '/mcp', '/mcp/everything']) {
      const d = await json(`${gateway.url}/.well-known/oauth-protected-resource${path}`);
      assert.deepEqual(d.authorization_servers, [gateway.url], path);
    }
  });

  test('with registration and documents off, neither is offered', async () => {
    const closed = await startBroker({ registration: false, clientIdMetadataDocuments: false });
    try {
      const m = await json(`${closed.url}/.well-known/oauth-authorization-server`);
      assert.equal(m.registration_endpoint, undefined);
      assert.equal(m.client_id_metadata_document_supported, undefined);
      const res = await fetch(`${closed.url}/oauth2/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: [callback.url] }) });
      assert.equal(res.status, 404);
      await res.body?.cancel();
    } finally {
      await closed.close();
    }
  });
});

describe('authorization requests', () => {
  let clientId: string;
  before(async () => {
    clientId = await register(gateway.url);
  });

  test('a well-formed request goes to the consent page (interaction)', async () => {
    const to = await authorizeRedirect(clientId);
    assert.match(to.pathname, /^\/oauth2\/interaction\/[A-Za-z0-9_-]+$/);
  });

  test('PKCE is required, and S256 is the only method', async () => {
    const without = await authorizeRedirect(clientId, { code_challenge: undefined, code_challenge_method: undefined });
    assert.equal(without.searchParams.get('error'), 'invalid_request');
    const plain = await authorizeRedirect(clientId, { code_challenge: 'a'.repeat(43), code_challenge_method: 'plain' });
    assert.equal(plain.searchParams.get('error'), 'invalid_request');
  });

  test('RFC 8707: a resource the gateway does not serve is invalid_target', async () => {
    const to = await authorizeRedirect(clientId, { resource: 'https://elsewhere.example/mcp' });
    assert.equal(to.searchParams.get('error'), 'invalid_target');
    assert.equal(to.searchParams.get('state'), 'st');
  });
});

describe('tokens the MCP endpoints take in broker mode', () => {
  let kids: string[];
  before(async () => {
    kids = ((await json(`${gateway.url}/oauth2/jwks`)).keys as Array<{ kid: string }>).map((k) => k.kid);
  });

  test('signed by the second configured key (before a rotation finished): accepted', async () => {
    assert.equal(await initializeStatus(await mintWith(KEYS[1]!, kids[1]!, { scope: 'mcp' })), 200);
  });

  test('signed by a key that is not configured: 401', async () => {
    assert.equal(await initializeStatus(await mintWith(ecPem(), kids[0]!, { scope: 'mcp' })), 401);
  });

  test('not an access token (typ JWT, as an ID token): 401', async () => {
    assert.equal(await initializeStatus(await mintWith(KEYS[0]!, kids[0]!, { scope: 'mcp' }, 'JWT')), 401);
  });

  test('issued by the upstream identity provider: 401 (the gateway is the authorization server now)', async () => {
    assert.equal(await initializeStatus(await oauth.token({ sub: 'carol', aud: `${gateway.url}/mcp/everything`, scope: 'mcp' })), 401);
  });
});

describe('the consent page', () => {
  async function consentPageFor(sub: string) {
    const context = await browser.newContext();
    await context.addCookies([oauth.subjectCookie(sub)]);
    const page = await context.newPage();
    await page.goto(authorizeUrl(await register(gateway.url)));
    return page;
  }

  test('names the client, the account, where the answer goes and what the client gets (auth.scopes when the request named none)', async () => {
    const page = await consentPageFor('dave');
    const text = await page.locator('main').innerText();
    assert.match(text, /Edge Client/);
    assert.match(text, /its name is not verified/);
    assert.match(text, /dave/);
    assert.ok(text.includes(new URL(callback.url).origin));
    assert.match(text, /The MCP server "everything"/);
    // The request named no scope: it gets auth.scopes.
    assert.deepEqual(await page.locator('ul.scopes li').allInnerTexts(), ['mcp']);
  });

  test('Deny answers the client access_denied', async () => {
    const page = await consentPageFor('erin');
    const redirected = callback.next();
    await page.getByRole('button', { name: 'Deny' }).click();
    const query = await redirected;
    assert.equal(query.get('error'), 'access_denied');
    assert.equal(query.get('state'), 'st');
  });

  test('a form without the session\'s CSRF token is refused and grants nothing', async () => {
    const page = await consentPageFor('frank');
    await page.locator('input[name="csrf"]').evaluate((input) => ((input as unknown as { value: string }).value = 'forged'));
    const answer = page.waitForResponse((res) => res.request().method() === 'POST');
    await page.getByRole('button', { name: 'Allow' }).click();
    assert.equal((await answer).status(), 403);
    assert.match(await page.locator('main').innerText(), /security token/);
  });
});
