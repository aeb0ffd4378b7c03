/**
 * Where the aggregated endpoint rewrites a member's answer to a call (names, URIs, ids), and
 * where the catalog remembers a backend's tools list, an answer the gateway cannot read exactly
 * is refused, never relayed untouched (issue 41 §1): -32010 under the client's own id, naming
 * the backend and why. Real parts: an OAuth server, Redis, a gateway, hostile v1 SDK backends
 * (test/fixtures/hostile-backend.ts) that answer `tools/call` (or `tools/list`) with the id as a
 * string, a byte-order mark, a batch around the response, or two candidates on a stream (the
 * first under the id as a string); the client is the official v1 SDK, which takes every one of
 * them when relayed as it came.
 *
 * Each test sets the shape of its own backend first, so none depends on another.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startHostileBackend, type HostileBackend, type ListShape } from '../fixtures/hostile-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { refused } from '../helpers/refused.js';

const NAMES = ['member', 'desked', 'linked'] as const;
const UNREADABLE = ['string-id', 'bom', 'batch', 'sse-two'] as const;

let idp: OAuthHandle;
let provider: OAuthHandle;
let redis: RedisHandle;
let gateway: GatewayHandle;
const backends = {} as Record<(typeof NAMES)[number], HostileBackend>;
const clients: Client[] = [];

before(async () => {
  [idp, provider, redis] = await Promise.all([startOAuthServer(), startOAuthServer(), startRedis()]);
  for (const name of NAMES) backends[name] = await startHostileBackend({ shapedMethods: name === 'linked' ? ['tools/list'] : ['tools/call'] });
  const upstreamAuth = { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['notes'] };
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    redisUrl: redis.url,
    port,
    backends: [
      { name: 'member', url: backends.member.url },
      { name: 'desked', url: backends.desked.url },
      { name: 'linked', url: backends.linked.url, upstreamAuth },
    ],
    overrides: {
      // upstreamAuth needs users to sign in (to link) and keys for cookies and tokens.
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
      secrets: { cookieKey: randomBytes(32).toString('base64url'), tokenKey: randomBytes(32).toString('base64url') },
      servers: [{ name: 'desk', tools: [{ from: 'desked.search', as: 'find_notes' }] }],
    },
  });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([...Object.values(backends).map((b) => b.close()), redis?.stop(), idp?.stop(), provider?.stop()]);
});

async function connect(path: string): Promise<Client> {
  const client = new Client({ name: 'alice', version: '1.0.0' });
  const token = await idp.token({ sub: 'alice', aud: gateway.audience });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}${path}`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, `connect ${path}`);
  clients.push(client);
  return client;
}

const search = { query: 'notes' };
const textOf = (result: unknown) => JSON.stringify((result as { content: unknown }).content);

for (const shape of UNREADABLE) {
  test(`/mcp, tools/call, ${shape}: the member's answer it cannot rewrite is refused, under the client's id`, async () => {
    const member = backends.member;
    member.shape = 'exact';
    const client = await connect('/mcp');
    assert.match(textOf(await client.callTool({ name: 'member__search', arguments: search })), /search/, 'called as usual');
    member.shape = shape;
    const reshaped = member.reshaped;
    await refused(client.callTool({ name: 'member__search', arguments: search }), -32010, /backend "member" sent an answer the gateway cannot judge/);
    assert.equal(member.reshaped, reshaped + 1, 'the member really answered in that shape');
    member.shape = 'exact';
    assert.match(textOf(await client.callTool({ name: 'member__stable', arguments: {} })), /stable/, 'the session goes on');
  });

  test(`virtual server, tools/call, ${shape}: the member's answer is refused, not relayed`, async () => {
    const desked = backends.desked;
    desked.shape = 'exact';
    const client = await connect('/mcp/desk');
    assert.match(textOf(await client.callTool({ name: 'find_notes', arguments: search })), /search/, 'called as usual');
    desked.shape = shape;
    await refused(client.callTool({ name: 'find_notes', arguments: search }), -32010, /backend "desked" sent an answer the gateway cannot judge/);
  });
}

test('/mcp, tools/call, duplicate: the client gets the one response the gateway read', async () => {
  backends.member.shape = 'duplicate';
  const client = await connect('/mcp');
  assert.match(textOf(await client.callTool({ name: 'member__search', arguments: search })), /search/);
  backends.member.shape = 'exact';
});

for (const shape of ['string-id', 'bom', 'batch', 'duplicate', 'sse-two'] satisfies ListShape[]) {
  test(`the catalog's tools list (upstreamAuth, not linked), ${shape}: neither remembered nor served`, async () => {
    const linked = backends.linked;
    linked.shape = 'exact';
    const client = await connect('/mcp/linked');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['search', 'stable', 'match'], 'listed as usual');
    linked.shape = shape;
    await refused(client.listTools(), -32010, /backend "linked" sent an answer the gateway cannot judge/);
  });
}
