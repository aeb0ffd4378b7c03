/**
 * The broker's token endpoint as a client meets it (issue 41 §7), on an in-process gateway in
 * broker mode with the default config (no `auth.scopes`), a real upstream IdP and real Chromium
 * for sign-in and consent:
 * - a token that grants no scope leaves `scope` out of the token response (RFC 6749 §5.1: a
 *   list of one or more scopes; `""` is not one), for the code and for the refresh;
 * - `token_endpoint_auth_methods_supported` lists only the methods some client can use here:
 *   `private_key_jwt` only while Client ID Metadata Documents are on (shown usable, end to end,
 *   by a document client that authenticates with it), the secret methods only while RFC 7591
 *   registration (which issues the secrets) is on.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { startBankBackend, type BankBackend } from '../fixtures/bank-backend.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { authorizationRequest, ecPem, startCallbackServer, startMetadataDocumentServer, type CallbackServer } from './support.js';

let oauth: OAuthHandle;
let bank: BankBackend;
let browser: BrowserHandle;
let callback: CallbackServer;
const gateways: GatewayHandle[] = [];

async function startBroker(broker: Record<string, unknown> = {}): Promise<GatewayHandle> {
  const port = await freePort();
  const gateway = await startGateway({
    port,
    issuer: oauth.issuer,
    backends: [{ name: 'bank', url: bank.url, protocol: '2025-11-25' }],
    overrides: {
      auth: { mode: 'broker', issuer: oauth.issuer, audience: `http://127.0.0.1:${port}/mcp`, login: { clientId: 'switchboard' }, broker: { signingKeys: [ecPem()], ...broker } },
      secrets: { cookieKey: 'c'.repeat(40), tokenKey: 't'.repeat(40) },
    },
  });
  gateways.push(gateway);
  return gateway;
}

before(async () => {
  [oauth, bank, browser, callback] = await Promise.all([startOAuthServer(), startBankBackend('legacy'), launchBrowser(), startCallbackServer()]);
});

after(async () => {
  await Promise.allSettled(gateways.map((g) => g.close()));
  await Promise.allSettled([browser?.close(), callback?.close(), bank?.close(), oauth?.stop()]);
});

type Body = Record<string, unknown>;

async function post(url: string, form: Record<string, string>): Promise<{ status: number; body: Body }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
  return { status: res.status, body: (await res.json()) as Body };
}

/** The user signs in upstream and allows; the code comes back to the callback. Sends no `scope`. */
async function authorizationCode(gateway: GatewayHandle, clientId: string, sub: string): Promise<{ code: string; verifier: string }> {
  const { url, verifier } = authorizationRequest(gateway.url, { clientId, redirectUri: callback.url, backend: 'bank' });
  const context = await browser.newContext();
  try {
    await context.addCookies([oauth.subjectCookie(sub)]);
    const page = await context.newPage();
    await page.goto(url);
    const redirected = callback.next();
    await page.getByRole('button', { name: 'Allow' }).click();
    const answer = await redirected;
    assert.equal(answer.get('error'), null, `authorization failed: ${answer.get('error_description')}`);
    return { code: answer.get('code')!, verifier };
  } finally {
    await context.close();
  }
}

/** RFC 6749 §5.1: `scope`, when present, names one or more scopes. */
function assertScopeWellFormed(body: Body): void {
  if ('scope' in body) assert.match(String(body.scope), /^\S+( \S+)*$/, `an empty or malformed scope: ${JSON.stringify(body.scope)}`);
}

describe('token responses of a grant without scope (the default config)', () => {
  let gateway: GatewayHandle;
  before(async () => {
    gateway = await startBroker();
  });

  test('a public registered client: the code and the refresh answer without "scope": ""', async () => {
    const registered = await fetch(`${gateway.url}/oauth2/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Scopeless', redirect_uris: [callback.url], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
    });
    assert.equal(registered.status, 201);
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const { code, verifier } = await authorizationCode(gateway, clientId, 'gina');
    const resource = `${gateway.url}/mcp/bank`;
    const tokens = await post(`${gateway.url}/oauth2/token`, { grant_type: 'authorization_code', code, redirect_uri: callback.url, code_verifier: verifier, client_id: clientId, resource });
    assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
    assert.ok(tokens.body.access_token);
    assertScopeWellFormed(tokens.body);
    const refreshed = await post(`${gateway.url}/oauth2/token`, { grant_type: 'refresh_token', refresh_token: String(tokens.body.refresh_token), client_id: clientId, resource });
    assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
    assertScopeWellFormed(refreshed.body);
  });

  test('private_key_jwt is usable: a Client ID Metadata Document client with its jwks authenticates with it and gets its tokens', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'doc-key', alg: 'ES256', use: 'sig' };
    const doc = await startMetadataDocumentServer((clientId) => ({
      client_id: clientId,
      client_name: 'Key Client',
      redirect_uris: [callback.url],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [jwk] },
    }));
    try {
      const assertion = () =>
        new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'doc-key' }).setIssuer(doc.clientId).setSubject(doc.clientId).setAudience(`${gateway.url}/oauth2/token`).setJti(randomUUID()).setIssuedAt().setExpirationTime('1m').sign(privateKey);
      const auth = async () => ({ client_id: doc.clientId, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: await assertion() });
      const { code, verifier } = await authorizationCode(gateway, doc.clientId, 'hank');
      const resource = `${gateway.url}/mcp/bank`;
      const tokens = await post(`${gateway.url}/oauth2/token`, { grant_type: 'authorization_code', code, redirect_uri: callback.url, code_verifier: verifier, resource, ...(await auth()) });
      assert.equal(tokens.status, 200, JSON.stringify(tokens.body));
      assert.ok(tokens.body.access_token);
      assertScopeWellFormed(tokens.body);
      const refreshed = await post(`${gateway.url}/oauth2/token`, { grant_type: 'refresh_token', refresh_token: String(tokens.body.refresh_token), resource, ...(await auth()) });
      assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
      assertScopeWellFormed(refreshed.body);
      // Without the assertion the same client is refused: the method is really checked.
      const unauthenticated = await post(`${gateway.url}/oauth2/token`, { grant_type: 'refresh_token', refresh_token: String(refreshed.body.refresh_token), client_id: doc.clientId });
      assert.equal(unauthenticated.body.error, 'invalid_client');
    } finally {
      await doc.close();
    }
  });
});

describe('token_endpoint_auth_methods_supported', () => {
  const methods = async (gateway: GatewayHandle) => {
    const metadata = (await (await fetch(`${gateway.url}/.well-known/oauth-authorization-server`)).json()) as Body;
    return [...(metadata.token_endpoint_auth_methods_supported as string[])].sort();
  };

  test('registration and documents on (the default): none, the secret methods, private_key_jwt', async () => {
    assert.deepEqual(await methods(await startBroker()), ['client_secret_basic', 'client_secret_jwt', 'client_secret_post', 'none', 'private_key_jwt']);
  });

  test('documents off: no private_key_jwt (registration refuses keys, so no client could use it)', async () => {
    assert.deepEqual(await methods(await startBroker({ clientIdMetadataDocuments: false })), ['client_secret_basic', 'client_secret_jwt', 'client_secret_post', 'none']);
  });

  test('registration off: no secret methods (nothing issues a secret)', async () => {
    assert.deepEqual(await methods(await startBroker({ registration: false })), ['none', 'private_key_jwt']);
  });
});
