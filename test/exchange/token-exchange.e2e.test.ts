/**
 * Backends that act as the user (issue 20, SPEC §8 "Token exchange"), on two gateway
 * replicas sharing one Redis, every client request alternating between them: a real
 * identity provider (oauth2-mock-server) signs the users' tokens, a real authorization
 * server process exchanges them (RFC 8693, and Entra's on-behalf-of grant), and the backends
 * accept only tokens exchanged for their own audience — 401 on everything else, `initialize`
 * included.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { decodeJwt } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { withDeadline } from '../helpers/deadline.js';
import { exchangesOf, startExchangeBackend, startExchangeServer, type ExchangeBackend, type ExchangeServer, type SeenExchange } from '../helpers/exchange.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { allToolNames } from '../helpers/pages.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let exchange: ExchangeServer;
let hr: ExchangeBackend;
let graph: ExchangeBackend;
let set: ReplicaSet;
const tokens: Record<string, string> = {};

before(async () => {
  [redis, idp] = await Promise.all([startRedis(), startOAuthServer()]);
  exchange = await startExchangeServer({ idpIssuer: idp.issuer });
  [hr, graph] = await Promise.all([startExchangeBackend(exchange.issuer, 'hr-api'), startExchangeBackend(exchange.issuer, 'api://graph-api')]);
  const client = { tokenUrl: exchange.tokenUrl, clientId: exchange.clientId, clientSecret: exchange.clientSecret };
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [
      { name: 'hr', url: hr.url, access: { scopes: ['hr'] }, tokenExchange: { ...client, audience: 'hr-api', scopes: ['hr.read'] } },
      { name: 'graph', url: graph.url, tokenExchange: { ...client, preset: 'entra-obo', scopes: ['api://graph-api/.default'] } },
    ],
    extra: { secrets: { tokenKey: 'exchange-test-token-key-0123456789abcdef' } },
  });
  for (const sub of ['alice', 'bob', 'carol']) tokens[sub] = await idp.token({ sub, aud: set.audience, scope: 'hr' });
  tokens.dave = await idp.token({ sub: 'dave', aud: set.audience, scope: 'other' });
  tokens.erin = await idp.token({ sub: 'erin', aud: set.audience, scope: 'hr', claims: { exchange: 'deny' } });
});

after(async () => {
  if (process.env.SB_DEBUG_REPLICAS) for (const r of set?.replicas ?? []) process.stderr.write(`--- replica ${r.index}\n${r.child.logs()}\n`);
  await set?.stop();
  await Promise.allSettled([hr?.stop(), graph?.stop(), exchange?.stop(), idp?.stop(), redis?.stop()]);
});

/** An SDK client whose every request goes to the next replica. */
async function connect(path: string, user: string): Promise<Client> {
  const client = new Client({ name: 'exchange-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}${path}`), {
    fetch: set.roundRobinFetch(),
    requestInit: { headers: { Authorization: `Bearer ${tokens[user]}` } },
  });
  await withDeadline(client.connect(transport), 15_000, `connect ${user} to ${path}`);
  return client;
}

async function whoami(client: Client, tool = 'whoami'): Promise<{ sub: string; aud: string }> {
  const result = (await withDeadline(client.callTool({ name: tool, arguments: {} }), 15_000, tool)) as CallToolResult;
  return JSON.parse((result.content[0] as { text: string }).text) as { sub: string; aud: string };
}

/** `whoami` as `user`, `times` over, in one session on `path`. */
async function whoamiAs(user: string, path: string, times: number): Promise<Array<{ sub: string; aud: string }>> {
  const client = await connect(path, user);
  try {
    const answers = [];
    for (let i = 0; i < times; i++) answers.push(await whoami(client));
    return answers;
  } finally {
    await client.close();
  }
}

async function refusal(promise: Promise<unknown>): Promise<McpError> {
  const err = await withDeadline(
    promise.then(
      () => assert.fail('expected a JSON-RPC error'),
      (e: unknown) => e,
    ),
    10_000,
    'the error',
  );
  assert.ok(err instanceof McpError, `expected an McpError, got ${String(err)}`);
  return err;
}

const hrExchangesOf = async (sub: string): Promise<SeenExchange[]> => exchangesOf(await exchange.exchanges(), sub).filter((e) => e.aud === 'hr-api');

describe('RFC 8693 on /mcp/{backend}', () => {
  test('the backend sees the user and its own audience, never the user\'s token; the cache saves every further exchange', { timeout: 60_000 }, async () => {
    assert.deepEqual(await whoamiAs('alice', '/mcp/hr', 4), Array(4).fill({ sub: 'alice', aud: 'hr-api' }));
    // initialize, initialized, the GET stream and four calls, over both replicas: one exchange.
    assert.equal((await hrExchangesOf('alice')).length, 1);
    const seen = await hr.seenAuthorizations();
    assert.ok(seen.length >= 6, `the backend saw ${seen.length} requests`);
    for (const header of seen) {
      assert.ok(!header.includes(tokens.alice!), 'the user\'s own token never reaches the backend');
      assert.equal(decodeJwt(header.replace(/^Bearer /, '')).iss, exchange.issuer);
    }
  });

  test('a second user gets their own token', { timeout: 60_000 }, async () => {
    assert.deepEqual(await whoamiAs('bob', '/mcp/hr', 2), Array(2).fill({ sub: 'bob', aud: 'hr-api' }));
    assert.equal((await hrExchangesOf('bob')).length, 1);
    const subjects = new Set((await hr.seenAuthorizations()).map((h) => decodeJwt(h.replace(/^Bearer /, '')).sub));
    assert.deepEqual([...subjects].sort(), ['alice', 'bob']);
  });

  test('a 401 costs exactly one fresh exchange and one retry; a second 401 is the error', { timeout: 60_000 }, async () => {
    const alice = await connect('/mcp/hr', 'alice');
    try {
      const before = (await hrExchangesOf('alice')).length;
      await hr.reject(1, 'tools/call');
      assert.deepEqual(await whoami(alice), { sub: 'alice', aud: 'hr-api' });
      assert.equal((await hrExchangesOf('alice')).length, before + 1, 'one re-exchange');
      assert.deepEqual(await whoami(alice), { sub: 'alice', aud: 'hr-api' });
      assert.equal((await hrExchangesOf('alice')).length, before + 1, 'the fresh token is cached for both replicas');

      await hr.reject(2, 'tools/call');
      const err = await refusal(alice.callTool({ name: 'whoami', arguments: {} }));
      assert.match(err.message, /backend "hr"/);
      assert.deepEqual(err.data, { backend: 'hr', reason: 'token_exchange', status: 401, exchange: 'ok', signInAgain: false });
      assert.equal((await hrExchangesOf('alice')).length, before + 2, 'again exactly one re-exchange');
    } finally {
      await alice.close();
    }
  });

  test('access policies still decide first: a user the backend does not admit costs no exchange', { timeout: 30_000 }, async () => {
    await assert.rejects(connect('/mcp/hr', 'dave'), /insufficient_scope/);
    assert.equal(exchangesOf(await exchange.exchanges(), 'dave').length, 0);
  });

  test('invalid_grant answers an error naming the backend that says signing in again may help', { timeout: 30_000 }, async () => {
    const err = await refusal(connect('/mcp/hr', 'erin'));
    assert.match(err.message, /backend "hr".*signing in again may help/);
    assert.ok(!err.message.includes(tokens.erin!));
    assert.deepEqual(err.data, { backend: 'hr', reason: 'token_exchange', exchange: 'invalid_grant', signInAgain: true });
  });
});

describe('Entra on-behalf-of (preset entra-obo)', () => {
  test('the backend sees the user and its API\'s audience; the grant is jwt-bearer on_behalf_of', { timeout: 60_000 }, async () => {
    assert.deepEqual(await whoamiAs('bob', '/mcp/graph', 2), Array(2).fill({ sub: 'bob', aud: 'api://graph-api' }));
    const obo = exchangesOf(await exchange.exchanges(), 'bob').filter((e) => e.aud === 'api://graph-api');
    assert.equal(obo.length, 1);
    assert.deepEqual(
      { grant: obo[0]!.grant, requestedTokenUse: obo[0]!.requestedTokenUse, clientAuth: obo[0]!.clientAuth },
      { grant: 'urn:ietf:params:oauth:grant-type:jwt-bearer', requestedTokenUse: 'on_behalf_of', clientAuth: 'client_secret_post' },
    );
  });
});

describe('the aggregated endpoint and WebSocket', () => {
  test('/mcp: each backend gets the token exchanged for it, from the same cache', { timeout: 60_000 }, async () => {
    const before = (await hrExchangesOf('alice')).length;
    const alice = await connect('/mcp', 'alice');
    try {
      const names = (await allToolNames(alice)).items;
      assert.ok(names.includes('hr__whoami') && names.includes('graph__whoami'), names.join(', '));
      assert.deepEqual(await whoami(alice, 'hr__whoami'), { sub: 'alice', aud: 'hr-api' });
      assert.deepEqual(await whoami(alice, 'graph__whoami'), { sub: 'alice', aud: 'api://graph-api' });
      await hr.reject(1, 'tools/call');
      assert.deepEqual(await whoami(alice, 'hr__whoami'), { sub: 'alice', aud: 'hr-api' });
    } finally {
      await alice.close();
    }
    assert.equal((await hrExchangesOf('alice')).length, before + 1, 'cached from /mcp/hr; one re-exchange for the 401');
  });

  test('/ws/mcp/{backend}: the same, through the gateway\'s loopback', { timeout: 30_000 }, async () => {
    const url = `${set.replicas[1]!.url.replace('http:', 'ws:')}/ws/mcp/hr`;
    const socket = new WebSocket(url, 'mcp', { headers: { authorization: `Bearer ${tokens.bob}` } });
    const frames: Array<{ id?: number; result?: { content?: Array<{ text: string }> } }> = [];
    socket.on('message', (data) => frames.push(JSON.parse(data.toString()) as (typeof frames)[number]));
    const answer = async (id: number) => {
      for (let i = 0; i < 200 && !frames.some((f) => f.id === id); i++) await new Promise((r) => setTimeout(r, 50));
      return frames.find((f) => f.id === id);
    };
    try {
      await once(socket, 'open');
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'ws', version: '1' } } }));
      assert.ok((await answer(1))?.result, 'initialized over WebSocket');
      socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'whoami', arguments: {} } }));
      assert.deepEqual(JSON.parse((await answer(2))!.result!.content![0]!.text), { sub: 'bob', aud: 'hr-api' });
    } finally {
      socket.close();
    }
    assert.equal((await hrExchangesOf('bob')).length, 1, 'bob\'s token from the cache');
  });
});

describe('the exchange endpoint down', () => {
  test('a user with nothing cached gets a prompt error naming the backend; cached users go on; counted; nothing logged', { timeout: 60_000 }, async () => {
    const alice = await connect('/mcp/hr', 'alice');
    try {
      await exchange.stop();
      const started = Date.now();
      const err = await refusal(connect('/mcp/hr', 'carol'));
      assert.ok(Date.now() - started < 5_000, `answered after ${Date.now() - started} ms`);
      assert.match(err.message, /backend "hr".*retry later/);
      assert.deepEqual(err.data, { backend: 'hr', reason: 'token_exchange', exchange: 'unavailable', signInAgain: false });
      assert.deepEqual(await whoami(alice), { sub: 'alice', aud: 'hr-api' }, 'a cached token needs no endpoint');
    } finally {
      await alice.close();
    }
    let unavailable = 0;
    for (const replica of set.replicas) {
      const text = await (await fetch(`${replica.url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('switchboard_token_exchanges_total{backend="hr",outcome="unavailable"}'));
      unavailable += Number(line?.split(' ').at(-1) ?? 0);
    }
    assert.ok(unavailable >= 1, 'counted as unavailable');
    const logs = set.replicas.map((r) => r.child.logs()).join('\n');
    assert.match(logs, /token exchange failed/);
    const exchanged = (await hr.seenAuthorizations()).map((h) => h.replace(/^Bearer /, ''));
    for (const secret of [...Object.values(tokens), ...exchanged]) assert.ok(!logs.includes(secret), 'no token in the logs');
  });
});
