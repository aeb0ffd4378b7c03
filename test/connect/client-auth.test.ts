/**
 * The gateway as the OAuth client of a backend's authorization server (`upstreamAuth:
 * { discover: true }`; issue 33 §1, §2, §4, §5, §6), through the real endpoint resolver
 * (src/providers/provider-endpoints.ts) against node:http fixtures on 127.0.0.1:
 *
 * - a registration that returns a client secret: sealed in the store, then sent as the
 *   registration and metadata say (test/fixtures/secret-post-server.ts: post only);
 * - the backend's 401 challenge first: its `resource_metadata`, its `scope`;
 * - the token endpoint auth method negotiated from registration and metadata;
 * - Client ID Metadata Documents, and the gateway's own document;
 * - the 2025-03-26 fallbacks: origin metadata, then default endpoints.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { negotiateAuthMethod } from '../../src/providers/client-identity.js';
import { exchangeCode, tokenResponse } from '../../src/providers/provider-client.js';
import { createEndpointResolver } from '../../src/providers/provider-endpoints.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { sendJson, startHttpFixture, type HttpFixture, type RecordedRequest } from '../fixtures/provider-http-fixture.js';
import { startSecretPostServer, type SecretPostServer } from '../fixtures/secret-post-server.js';

const PUBLIC_URL = 'http://127.0.0.1:1';
const CIMD_URL = 'https://client.example/switchboard.json';

function resolverFor(backendUrl: string, upstream: Record<string, unknown> = {}, publicUrl = PUBLIC_URL) {
  const config = parseConfig({
    publicUrl,
    auth: { issuer: 'http://127.0.0.1:1', audience: `${publicUrl}/mcp`, login: { clientId: 'switchboard-web' } },
    backends: [{ name: 'remote', url: backendUrl, upstreamAuth: { provider: 'remote', discover: true, ...upstream } }],
  } as ConfigInput);
  const store = new MemoryStore();
  const resolve = createEndpointResolver(config, store, createTokenCipher('client-auth-test-key'));
  return { store, resolved: () => resolve(config.backends[0]!) };
}

/** The code an authorization endpoint that approves at once puts into its redirect. */
async function codeFrom(authorizationUrl: string, q: Record<string, string>): Promise<string> {
  const url = new URL(authorizationUrl);
  for (const [k, v] of Object.entries(q)) url.searchParams.set(k, v);
  const res = await fetch(url, { redirect: 'manual' });
  assert.equal(res.status, 302);
  return new URL(res.headers.get('location')!).searchParams.get('code')!;
}

describe('a registration that returns a client secret (client_secret_post only)', () => {
  let server: SecretPostServer;
  before(async () => {
    server = await startSecretPostServer();
  });
  after(async () => {
    await server?.close();
  });

  test('the secret is kept sealed in the store and sent in the body, as registration and metadata say', async () => {
    const { store, resolved } = resolverFor(server.mcpUrl);
    const endpoints = await resolved();
    assert.equal(server.clients.size, 1, 'registered once');
    const [clientId, secret] = [...server.clients][0]!;
    assert.equal(endpoints.clientId, clientId);
    assert.equal(endpoints.clientSecret, secret);
    assert.equal(endpoints.tokenEndpointAuthMethod, 'client_secret_post');
    const stored = await store.getValue('client:remote');
    assert.ok(stored && !stored.includes(secret!), 'the stored registration holds the secret sealed only');

    const code = await codeFrom(endpoints.authorizationUrl, { client_id: clientId!, redirect_uri: 'http://127.0.0.1:1/oauth/callback/remote', state: 's', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM' });
    const tokens = await exchangeCode(endpoints, { code, redirectUri: 'http://127.0.0.1:1/oauth/callback/remote', codeVerifier: 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk' }, endpoints.request);
    assert.match(tokens.accessToken, /^sp-/);
    assert.deepEqual(server.tokenRequests.at(-1), { basic: false, bodySecret: true, accepted: true });
  });

  test('the scope of the backend\'s 401 challenge is asked for (before the PRM\'s scopes_supported)', async () => {
    const { resolved } = resolverFor(server.mcpUrl);
    assert.deepEqual((await resolved()).scopes, ['files:read']);
  });
});

describe('token endpoint auth method', () => {
  test('negotiated from the registration answer and the metadata\'s list', () => {
    assert.equal(negotiateAuthMethod(false, 'client_secret_basic', ['client_secret_basic']), 'none', 'no secret: a public client');
    assert.equal(negotiateAuthMethod(true, 'client_secret_post', ['client_secret_post']), 'client_secret_post');
    assert.equal(negotiateAuthMethod(true, 'client_secret_post', undefined), 'client_secret_post');
    assert.equal(negotiateAuthMethod(true, undefined, ['client_secret_post']), 'client_secret_post');
    assert.equal(negotiateAuthMethod(true, undefined, ['client_secret_post', 'client_secret_basic']), 'client_secret_basic');
    assert.equal(negotiateAuthMethod(true, 'client_secret_jwt', ['client_secret_post']), 'client_secret_post', 'a method the gateway does not speak is passed over');
    assert.equal(negotiateAuthMethod(true, undefined, ['none']), 'none', 'a server that takes only public clients gets no secret');
    assert.equal(negotiateAuthMethod(true, undefined, undefined), 'client_secret_basic', 'RFC 8414 default');
  });

  test('the token request sends what was negotiated: post in the body, none without the secret', async () => {
    const seen: RecordedRequest[] = [];
    const fx = await startHttpFixture((req, res) => {
      seen.push(req);
      sendJson(res, 200, { access_token: 'a', token_type: 'Bearer' });
    });
    try {
      const base = { tokenUrl: `${fx.origin}/token`, clientId: 'id', clientSecret: 'shh' };
      await tokenResponse({ ...base, tokenEndpointAuthMethod: 'client_secret_post' }, new URLSearchParams({ grant_type: 'x' }), []);
      await tokenResponse({ ...base, tokenEndpointAuthMethod: 'none' }, new URLSearchParams({ grant_type: 'x' }), []);
      await tokenResponse(base, new URLSearchParams({ grant_type: 'x' }), []);
      assert.equal(seen[0]!.headers.authorization, undefined);
      assert.equal(seen[0]!.form.get('client_secret'), 'shh');
      assert.equal(seen[1]!.headers.authorization, undefined);
      assert.equal(seen[1]!.form.get('client_secret'), null);
      assert.equal(seen[1]!.form.get('client_id'), 'id');
      assert.match(String(seen[2]!.headers.authorization), /^Basic /, 'unsaid: client_secret_basic');
    } finally {
      await fx.close();
    }
  });
});

describe('discovery order', () => {
  type Answer = { status: number; body?: unknown; headers?: Record<string, string> };
  let routes: Record<string, (req: RecordedRequest) => Answer | undefined> = {};
  let fx: HttpFixture;
  before(async () => {
    fx = await startHttpFixture((req, res) => {
      const answer = routes[req.path]?.(req);
      if (answer) sendJson(res, answer.status, answer.body ?? {}, answer.headers);
    });
  });
  after(async () => {
    await fx?.close();
  });
  beforeEach(() => {
    routes = {};
    fx.requests.length = 0;
  });
  const asMetadata = (issuer: string, over: Record<string, unknown> = {}) => ({
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    registration_endpoint: `${issuer}/register`,
    code_challenge_methods_supported: ['S256'],
    ...over,
  });
  const register = (): Answer => ({ status: 201, body: { client_id: 'registered' } });

  test('the 401\'s resource_metadata is fetched first, before any well-known URL', async () => {
    const o = fx.origin;
    routes['/mcp'] = () => ({ status: 401, body: {}, headers: { 'www-authenticate': `Bearer resource_metadata="${o}/custom/metadata/location.json"` } });
    routes['/custom/metadata/location.json'] = () => ({ status: 200, body: { resource: `${o}/mcp`, authorization_servers: [`${o}/tenant1`] } });
    routes['/tenant1/.well-known/openid-configuration'] = () => ({ status: 200, body: asMetadata(`${o}/tenant1`) });
    routes['/tenant1/register'] = register;
    const endpoints = await resolverFor(`${o}/mcp`).resolved();
    assert.equal(endpoints.authorizationUrl, `${o}/tenant1/authorize`);
    const gets = fx.requests.filter((r) => r.method === 'GET').map((r) => r.path);
    assert.equal(gets[0], '/custom/metadata/location.json');
    assert.ok(!gets.some((p) => p.startsWith('/.well-known/oauth-protected-resource')), gets.join(' '));
    assert.deepEqual(endpoints.scopes, [], 'no challenge scope, no scopes_supported: none asked for');
  });

  test('2025-03-26: without protected resource metadata, the origin\'s RFC 8414 metadata', async () => {
    const o = fx.origin;
    routes['/mcp'] = () => ({ status: 401, body: {}, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });
    routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata(`${o}/oauth`) });
    routes['/oauth/register'] = register;
    const endpoints = await resolverFor(`${o}/mcp`).resolved();
    assert.equal(endpoints.authorizationUrl, `${o}/oauth/authorize`);
    assert.equal(endpoints.tokenUrl, `${o}/oauth/token`);
    assert.equal(endpoints.clientId, 'registered');
    assert.equal(endpoints.resource, undefined, 'no PRM: no resource indicator');
  });

  test('2025-03-26: without any metadata, /authorize, /token and /register on the backend\'s origin', async () => {
    const o = fx.origin;
    routes['/mcp'] = () => ({ status: 401, body: {} });
    routes['/register'] = () => ({ status: 201, body: { client_id: 'legacy', client_secret: 'legacy-secret' } });
    const endpoints = await resolverFor(`${o}/mcp`).resolved();
    assert.equal(endpoints.authorizationUrl, `${o}/authorize`);
    assert.equal(endpoints.tokenUrl, `${o}/token`);
    assert.equal(endpoints.clientId, 'legacy');
    assert.equal(endpoints.clientSecret, 'legacy-secret');
    assert.equal(fx.hits('/register').length, 1);
  });

  test('Client ID Metadata Documents: the configured URL is the client_id where supported, and nothing is registered', async () => {
    const o = fx.origin;
    routes['/mcp'] = () => ({ status: 401, body: {}, headers: { 'www-authenticate': `Bearer resource_metadata="${o}/.well-known/oauth-protected-resource/mcp"` } });
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: `${o}/mcp`, authorization_servers: [o] } });
    routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata(o, { client_id_metadata_document_supported: true }) });
    routes['/register'] = register;
    const withDocument = await resolverFor(`${o}/mcp`, { clientMetadataUrl: CIMD_URL }).resolved();
    assert.equal(withDocument.clientId, CIMD_URL);
    assert.equal(withDocument.tokenEndpointAuthMethod, 'none');
    assert.equal(fx.hits('/register').length, 0);
    // A plain-http publicUrl cannot name a document an authorization server could fetch: registration.
    const withoutDocument = await resolverFor(`${o}/mcp`).resolved();
    assert.equal(withoutDocument.clientId, 'registered');
    // A configured client comes first (pre-registration).
    const configured = await resolverFor(`${o}/mcp`, { clientId: 'pre', clientSecret: 'pre-secret', clientMetadataUrl: CIMD_URL }).resolved();
    assert.equal(configured.clientId, 'pre');
    assert.equal(configured.tokenEndpointAuthMethod, 'client_secret_basic');
  });
});

test('the gateway serves its own client ID metadata document under publicUrl', async () => {
  const config = parseConfig({
    publicUrl: 'https://mcp.example.com',
    log: { level: 'silent' },
    auth: { issuer: 'http://127.0.0.1:1', audience: 'https://mcp.example.com/mcp', login: { clientId: 'switchboard-web' } },
    backends: [
      { name: 'remote', url: 'https://remote.example/mcp', upstreamAuth: { provider: 'remote', discover: true } },
      { name: 'other', url: 'https://other.example/mcp', upstreamAuth: { provider: 'other', discover: true } },
    ],
  } as ConfigInput);
  const app = await buildApp(config, { store: new MemoryStore() });
  try {
    const res = await app.inject({ method: 'GET', url: '/oauth/client-metadata.json', headers: { host: 'mcp.example.com' } });
    assert.equal(res.statusCode, 200);
    const doc = res.json() as Record<string, unknown>;
    assert.equal(doc.client_id, 'https://mcp.example.com/oauth/client-metadata.json');
    assert.deepEqual(doc.redirect_uris, ['https://mcp.example.com/oauth/callback/other', 'https://mcp.example.com/oauth/callback/remote']);
    assert.equal(doc.token_endpoint_auth_method, 'none');
  } finally {
    await app.close();
  }
});

test('upstreamAuth.clientMetadataUrl: an https URL with a path, with discover only', () => {
  const config = (upstreamAuth: Record<string, unknown>) => () =>
    parseConfig({
      publicUrl: PUBLIC_URL,
      auth: { issuer: 'http://127.0.0.1:1', audience: `${PUBLIC_URL}/mcp`, login: { clientId: 'switchboard-web' } },
      backends: [{ name: 'remote', url: 'https://remote.example/mcp', upstreamAuth: { provider: 'remote', ...upstreamAuth } }],
    } as ConfigInput);
  assert.doesNotThrow(config({ discover: true, clientMetadataUrl: CIMD_URL }));
  assert.throws(config({ discover: true, clientMetadataUrl: 'http://client.example/doc.json' }), /https URL with a path/);
  assert.throws(config({ discover: true, clientMetadataUrl: 'https://client.example' }), /https URL with a path/);
  assert.throws(config({ clientMetadataUrl: CIMD_URL, clientId: 'x', authorizationUrl: 'https://a.example/authorize', tokenUrl: 'https://a.example/token' }), /only with discover/);
});
