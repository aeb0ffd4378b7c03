/**
 * An authorization-server migration (issue 42 §6, SEP-2352) across replicas, whose discovery
 * is each their own: two real gateway processes on one Redis (test/helpers/replicas.ts; the
 * browser pages live at replica 0's public URL), the SDK v1 client as the user, discovered
 * authorization servers (test/fixtures/discovered-provider.ts), the backend of
 * test/fixtures/moving-backend.ts and Chromium walking the links.
 *
 * Replica 0 discovers the first server when the users link. After the backend moves, replica
 * 1 — which never discovered it — notices from the refused token's recorded issuer, discovers
 * the new server and registers there; the link it hands out names that server, so replica 0,
 * still holding the old discovery, discovers again before sending the browser anywhere. A
 * user whose stored link is from the old server is asked to link again without that token
 * ever reaching the backend.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startDiscoveredProvider, type DiscoveredProvider } from '../fixtures/discovered-provider.js';
import { startMovingBackend, type MovingBackend } from '../fixtures/moving-backend.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { eventually, linkInBrowser, linkRequired, watchedClient } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let browser: BrowserHandle;
let servers: DiscoveredProvider;
let backend: MovingBackend;
let replicas: ReplicaSet;

before(async () => {
  [redis, idp, browser, servers] = await Promise.all([
    startRedis(),
    startOAuthServer(),
    launchBrowser(),
    startDiscoveredProvider({ old: { scopes: ['files:read'], issParameter: true }, new: { scopes: ['files:read'], issParameter: true } }),
  ]);
  backend = await startMovingBackend(servers, 'old', ['files:read'], ['files:read']);
  replicas = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [{ name: 'moving', url: backend.mcpUrl, upstreamAuth: { provider: 'moving', discover: true } }],
    auth: { login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    extra: { secrets: { cookieKey: 'moved-rep-cookie-key-0123456789abcdef01234567', tokenKey: 'moved-rep-token-key-0123456789abcdef012345678' } },
  });
});

after(async () => {
  await browser?.close();
  await replicas?.stop();
  await Promise.allSettled([idp?.stop(), redis?.stop(), servers?.close(), backend?.close()]);
});

async function connect(sub: string, replica: number): Promise<{ client: Client; completed: string[] }> {
  return watchedClient(replicas.endpoint(replica, 'moving'), await idp.token({ sub, aud: replicas.audience }), `moved-${sub}`);
}

async function linkAs(sub: string, user: { client: Client; completed: string[] }): Promise<void> {
  const link = await linkRequired(user.client, 'whoami');
  assert.ok(link.url.startsWith(replicas.replicas[0]!.url), 'the pages are at replica 0');
  await linkInBrowser(browser, link.url, 'moving', [idp.subjectCookie(sub)]);
  await eventually('the link to complete', () => user.completed.includes(link.elicitationId));
}

const whoami = async (client: Client) => JSON.stringify(((await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult).content);
const sentWith = (token: string) => backend.fixture.hits('/mcp').filter((h) => h.headers.authorization === `Bearer ${token}`).length;

test('a move noticed on one replica is followed on the other; a link from the old server is not sent again', { timeout: 180_000 }, async () => {
  const fay = await connect('fay', 1);
  const gus = await connect('gus', 0);
  try {
    await linkAs('fay', fay);
    await linkAs('gus', gus);
    assert.match(await whoami(fay.client), /whoami with scope files:read/);
    const [fayOld, gusOld] = servers.issuedTokens('old');
    assert.equal(servers.registrations('old').length, 1);
    // What went with fay's token so far: her call, and what the gateway did on her link.
    const fayBefore = sentWith(fayOld!);

    backend.moveTo('new');
    // Replica 1 holds no discovery: the refused token's issuer tells it the backend moved.
    await linkAs('fay', fay);
    assert.equal(servers.registrations('new').length, 1, 'one client registered at the new server, shared by both replicas');
    assert.equal(servers.authorizationClients('new').length, 1, 'replica 0 sent the browser to the new server');
    assert.ok(!servers.authorizationClients('old').includes(servers.authorizationClients('new')[0]!), 'the old client_id is not used at the new server');
    assert.equal(servers.issuedTokens('old').length, 2, 'no link at the old server after the move');
    assert.match(await whoami(fay.client), /whoami with scope files:read/);
    assert.equal(backend.accepted().at(-1), servers.issuedTokens('new').at(-1));
    assert.equal(sentWith(fayOld!), fayBefore + 1, 'fay\'s old token went once after the move: the call the backend refused');

    // Gus's stored link is from the old server: replica 0 (now on the new one) asks for a new link, sending nothing.
    const before = sentWith(gusOld!);
    await linkAs('gus', gus);
    assert.equal(sentWith(gusOld!), before, 'the old server\'s token was not sent to the backend again');
    assert.match(await whoami(gus.client), /whoami with scope files:read/);
    assert.equal(backend.accepted().at(-1), servers.issuedTokens('new').at(-1));
  } finally {
    await Promise.allSettled([fay.client.close(), gus.client.close()]);
  }
});
