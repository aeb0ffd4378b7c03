/**
 * What a MCP 2026-07-28 client meets on `/mcp/{backend}` (issue 15; src/stateless/), on the raw
 * wire with real servers: the revision's checks, each error echoing the request's id; GET and
 * DELETE refused; cache hints that keep a backend's `"public"` only where every user sees the
 * same answer; the gateway's own session toward a 2025-era backend — one per user, reused, and
 * opened again without the client noticing when the backend lost it; `server/discover` made
 * from that backend's `initialize`.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startEraBackend, type EraBackend } from '../fixtures/era-backends.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

/** A 2026-only server on raw node:http whose lists say they may be cached by anyone for 5 s. */
async function startPublicListBackend(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: unknown; method: string };
      const result =
        message.method === 'server/discover'
          ? { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {} } }
          : { resultType: 'complete', tools: [{ name: 'same-for-all', inputSchema: { type: 'object' } }], ttlMs: 5000, cacheScope: 'public' };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

let oauth: OAuthHandle;
let legacy: EraBackend;
let lists: { url: string; close(): Promise<void> };
let gateway: GatewayHandle;
let token: string;

before(async () => {
  [oauth, legacy, lists] = await Promise.all([startOAuthServer(), startEraBackend('legacy'), startPublicListBackend()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      { name: 'legacy', url: legacy.url },
      { name: 'open', url: lists.url },
      { name: 'scoped', url: lists.url, access: { scopes: ['lists'] } },
    ],
  });
  token = await oauth.token({ sub: 'ada', aud: gateway.audience, scope: 'lists' });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([legacy?.close(), lists?.close(), oauth?.stop()]);
});

interface Answer {
  status: number;
  headers: Headers;
  body: { id?: unknown; result?: Record<string, unknown>; error?: { code: number; data?: Record<string, unknown> } };
}

async function post(backend: string, message: Record<string, unknown>, headers: Record<string, string> = {}, bearer = token): Promise<Answer> {
  const res = await fetch(gateway.endpoint(backend), {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Answer['body'] };
}

const callEra = (id: number, extra: Record<string, string> = {}, bearer = token) => post('legacy', { id, method: 'tools/call', params: { name: 'era', arguments: {}, _meta: META } }, { 'mcp-method': 'tools/call', 'mcp-name': 'era', ...extra }, bearer);

describe('the checks of the revision, on the wire', () => {
  test('each refusal has the revision\'s status and code and echoes the id', async () => {
    const noMeta = await post('legacy', { id: 1, method: 'tools/list', params: {} }, { 'mcp-method': 'tools/list' });
    assert.deepEqual([noMeta.status, noMeta.body.error?.code, noMeta.body.id], [400, -32602, 1]);
    const mismatch = await callEra(2, { 'mcp-name': 'other' });
    assert.deepEqual([mismatch.status, mismatch.body.error?.code, mismatch.body.id], [400, -32020, 2]);
    const future = await post('legacy', { id: 3, method: 'tools/list', params: { _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': '2027-01-01' } } }, { 'mcp-method': 'tools/list', 'mcp-protocol-version': '2027-01-01' });
    assert.deepEqual([future.status, future.body.error?.code, future.body.id], [400, -32022, 3]);
    assert.deepEqual(future.body.error?.data, { supported: ['2026-07-28'], requested: '2027-01-01' });
    const ping = await post('legacy', { id: 4, method: 'ping', params: { _meta: META } }, { 'mcp-method': 'ping' });
    assert.deepEqual([ping.status, ping.body.error?.code, ping.body.id], [404, -32601, 4]);
  });

  test('a standard header on two lines, even with one value, is -32020 (the header lines are read as sent, not as Node joins them)', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'era', arguments: {}, _meta: META } });
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(gateway.endpoint('legacy'), {
        method: 'POST',
        headers: { ...statelessHeaders(token, 'tools/call'), 'mcp-name': ['era', 'era'] },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      });
      req.on('error', reject);
      req.end(body);
    });
    const parsed = JSON.parse(answer.text) as Answer['body'] & { error?: { message?: string } };
    assert.deepEqual([answer.status, parsed.error?.code, parsed.id], [400, -32020, 6]);
    assert.match(parsed.error?.message ?? '', /more than once/);
  });

  test('an Mcp-Name in the Base64 sentinel form that matches is served', async () => {
    const answer = await callEra(5, { 'mcp-name': `=?base64?${Buffer.from('era').toString('base64')}?=` });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.result?.resultType, 'complete');
  });

  test('GET and DELETE get 405 with Allow: POST', async () => {
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(gateway.endpoint('legacy'), { method, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-protocol-version': '2026-07-28' } });
      await res.arrayBuffer();
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get('allow'), 'POST', method);
    }
  });
});

describe('cache hints', () => {
  test('a backend\'s "public" stands where every user sees the same answer, and becomes "private" behind an access rule', async () => {
    const list = (backend: string) => post(backend, { id: 6, method: 'tools/list', params: { _meta: META } }, { 'mcp-method': 'tools/list' });
    const open = await list('open');
    assert.deepEqual([open.body.result?.cacheScope, open.body.result?.ttlMs], ['public', 5000], JSON.stringify(open.body));
    const scoped = await list('scoped');
    assert.deepEqual([scoped.body.result?.cacheScope, scoped.body.result?.ttlMs], ['private', 5000], JSON.stringify(scoped.body));
    const bridged = await list('legacy');
    assert.deepEqual([bridged.body.result?.cacheScope, bridged.body.result?.ttlMs], ['private', 0], JSON.stringify(bridged.body));
  });
});

describe('the gateway\'s own session toward a 2025-era backend', () => {
  const initializes = () => legacy.seen.filter((r) => r.rpcMethod === 'initialize').length;

  test('one session per user, reused call after call; server/discover made from its initialize', async () => {
    const before = initializes();
    const cleo = await oauth.token({ sub: 'cleo', aud: gateway.audience });
    for (let id = 10; id < 15; id++) assert.equal((await callEra(id, {}, cleo)).body.result?.resultType, 'complete');
    assert.equal(initializes() - before, 1, 'the first call opened it, the others reused it');
    const other = await oauth.token({ sub: 'grace', aud: gateway.audience });
    await callEra(15, {}, other);
    assert.equal(initializes() - before, 2, 'another user gets a session of their own');
    const discover = await post('legacy', { id: 16, method: 'server/discover', params: { _meta: META } }, { 'mcp-method': 'server/discover' });
    assert.deepEqual(discover.body.result?.supportedVersions, ['2026-07-28']);
    assert.deepEqual((discover.body.result?._meta as Record<string, { name: string }>)['io.modelcontextprotocol/serverInfo']?.name, 'era-legacy');
  });

  test('a session the backend lost is opened again and the call answered', async () => {
    assert.equal((await callEra(20)).body.result?.resultType, 'complete');
    const port = Number(new URL(legacy.url).port);
    await legacy.close();
    legacy = await startEraBackend('legacy', { port });
    const answer = await callEra(21);
    assert.equal(answer.body.result?.resultType, 'complete', JSON.stringify(answer.body));
    assert.equal(initializes(), 1, 'the restarted backend saw one new initialize');
  });
});
