/**
 * The gateway as the client of a backend whose demands change in its life (issue 42 §6 and
 * §8), end to end: a real gateway on Redis, the MCP authorization server of its own users
 * (oauth2-mock-server), the official SDK v1 client as the user, discovered authorization
 * servers (test/fixtures/discovered-provider.ts: RFC 8414, RFC 7591, the code grant with
 * PKCE), test/fixtures/moving-backend.ts as the backend, and Chromium walking every link.
 *
 * - §8: the backend admits a token-less `initialize` and challenges only `tools/list`
 *   (`scope="files:read"`), while its metadata lists `profile`: the first link asks for the
 *   challenge's scope and then lists work. Later it wants more for `tools/list` (403
 *   `insufficient_scope`): the client gets a step-up link for the union, and then lists work.
 *   A backend that answers a token lacking a scope with 401 naming it gets the same union.
 * - §6: the backend's metadata moves from one authorization server to another (SEP-2352) and
 *   it refuses the tokens of the first: the next call leads to a link at the new one, with a
 *   client registered there (never the old one's), and calls work with its token.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startDiscoveredProvider, type DiscoveredProvider } from '../fixtures/discovered-provider.js';
import { startMovingBackend, type MovingBackend } from '../fixtures/moving-backend.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { eventually, linkInBrowser, linkRequired, watchedClient, type UrlElicitation } from '../helpers/linking-journey.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const TIMEOUT_MS = 120_000;

let redis: RedisHandle;
let idp: OAuthHandle;
let browser: BrowserHandle;
let servers: DiscoveredProvider;
let scoped: MovingBackend;
let moving: MovingBackend;
let strict: MovingBackend;
let gateway: GatewayHandle;

before(async () => {
  [redis, idp, browser, servers] = await Promise.all([
    startRedis(),
    startOAuthServer(),
    launchBrowser(),
    startDiscoveredProvider({
      step: { scopes: ['profile'], issParameter: true },
      as1: { scopes: ['files:read'], issParameter: true },
      as2: { scopes: ['files:read'], issParameter: true },
      s401: { scopes: ['files:read'], issParameter: true },
    }),
  ]);
  [scoped, moving, strict] = await Promise.all([
    startMovingBackend(servers, 'step', ['files:read']),
    startMovingBackend(servers, 'as1', ['files:read'], ['files:read']),
    startMovingBackend(servers, 's401', ['files:read'], ['files:read'], 401),
  ]);
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    redisUrl: redis.url,
    backends: [
      { name: 'scoped', url: scoped.mcpUrl, upstreamAuth: { provider: 'step', discover: true } },
      { name: 'moving', url: moving.mcpUrl, upstreamAuth: { provider: 'moving', discover: true } },
      { name: 'strict', url: strict.mcpUrl, upstreamAuth: { provider: 's401', discover: true } },
    ],
    overrides: {
      secrets: { cookieKey: 'moved-cookie-key-0123456789abcdef0123456789ab', tokenKey: 'moved-token-key-0123456789abcdef0123456789abc' },
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  await Promise.allSettled([idp?.stop(), redis?.stop(), servers?.close(), scoped?.close(), moving?.close(), strict?.close()]);
});

/** An SDK v1 client of `/mcp/{backend}` as `sub`; `completed` collects finished links. */
async function connect(sub: string, backend: string): Promise<{ client: Client; completed: string[] }> {
  return watchedClient(gateway.endpoint(backend), await idp.token({ sub, aud: gateway.audience }), `moved-${sub}`);
}

/** Walks `link` in Chromium as `sub` at `provider` and waits for the client to hear it completed. */
async function walk(link: UrlElicitation, provider: string, sub: string, completed: string[]): Promise<string> {
  const consent = await linkInBrowser(browser, link.url, provider, [idp.subjectCookie(sub)]);
  await eventually('the link to complete', () => completed.includes(link.elicitationId));
  return consent;
}

const text = (result: unknown) => JSON.stringify((result as CallToolResult).content);

test('§8: the scope of the 401 to tools/list is asked for; a 403 insufficient_scope on tools/list leads to a step-up link for the union, then tools/list works', { timeout: TIMEOUT_MS }, async () => {
  const { client, completed } = await connect('carla', 'scoped');
  try {
    const first = await linkRequired(client, 'whoami');
    await walk(first, 'step', 'carla', completed);
    assert.deepEqual(servers.authorizationScopes('step'), ['files:read'], 'the first link asks for the scope of the challenge to tools/list, not the metadata\'s profile');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['whoami', 'write'], 'tools/list works with the first link');
    assert.match(text(await client.callTool({ name: 'whoami', arguments: {} })), /whoami with scope files:read/);

    scoped.setListScope(['files:read', 'files:admin']);
    const refused = await client.listTools().then((r) => r, (err: unknown) => err);
    assert.ok(refused instanceof McpError, `expected -32042 for tools/list, got ${JSON.stringify(refused)}`);
    assert.equal(refused.code, -32042, refused.message);
    const [stepUp] = (refused.data as { elicitations: UrlElicitation[] }).elicitations;
    assert.match(stepUp!.message, /needs more access.*files:read files:admin/);
    const consent = await walk(stepUp!, 'step', 'carla', completed);
    assert.match(consent, /files:admin/, 'the consent page names the wider scope');
    assert.deepEqual(servers.authorizationScopes('step'), ['files:read', 'files:read files:admin'], 'the step-up asks for the union of granted and challenged scopes');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['whoami', 'write'], 'tools/list works after the step-up');
  } finally {
    await client.close();
  }
});

test('§6: the backend moves to another authorization server; the next call leads to a link there, with a client registered there, and calls work with its token', { timeout: TIMEOUT_MS }, async () => {
  const { client, completed } = await connect('dora', 'moving');
  try {
    const first = await linkRequired(client, 'whoami');
    await walk(first, 'moving', 'dora', completed);
    assert.match(text(await client.callTool({ name: 'whoami', arguments: {} })), /whoami with scope files:read/);
    assert.equal(servers.registrations('as1').length, 1, 'a client registered at the first server');
    assert.equal(moving.accepted().at(-1), servers.issuedTokens('as1').at(-1));

    moving.moveTo('as2');
    const second = await linkRequired(client, 'whoami');
    assert.equal(servers.registrations('as2').length, 1, 'the gateway registered a client at the new authorization server');
    await walk(second, 'moving', 'dora', completed);
    assert.equal(servers.authorizationClients('as2').length, 1, 'the link went to the new authorization server');
    const as1Clients = new Set(servers.authorizationClients('as1'));
    assert.ok(!as1Clients.has(servers.authorizationClients('as2')[0]!), 'the old server\'s client_id is never shown to the new one');
    assert.equal(servers.issuedTokens('as1').length, 1, 'no second link at the old server');

    assert.match(text(await client.callTool({ name: 'whoami', arguments: {} })), /whoami with scope files:read/);
    assert.equal(moving.accepted().at(-1), servers.issuedTokens('as2').at(-1), 'the call went with the new server\'s token');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['whoami', 'write']);
  } finally {
    await client.close();
  }
});

test('§8: a 401 to the user\'s token whose challenge names a scope it lacks leads to a link for the union; then the call works', { timeout: TIMEOUT_MS }, async () => {
  const { client, completed } = await connect('emil', 'strict');
  try {
    await walk(await linkRequired(client, 'whoami'), 's401', 'emil', completed);
    assert.match(text(await client.callTool({ name: 'whoami', arguments: {} })), /whoami with scope files:read/);
    const wider = await linkRequired(client, 'write');
    assert.match(wider.message, /needs more access.*files:read write/);
    await walk(wider, 's401', 'emil', completed);
    assert.deepEqual(servers.authorizationScopes('s401'), ['files:read', 'files:read write'], 'the second link asks for what the token had and what the 401 named');
    assert.match(text(await client.callTool({ name: 'write', arguments: {} })), /write with scope files:read write/);
  } finally {
    await client.close();
  }
});
