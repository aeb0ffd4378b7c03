/**
 * What the gateway judges must be what the backend runs (issue 41 §5): a `tools/call` or
 * `prompts/get` whose `params.name`, or a `resources/read` / `resources/subscribe` whose
 * `params.uri`, is not a string was read as "" by the tool policy, `access.tools.deny`,
 * `policy.rules` and pinning, then forwarded — and a backend that looks handlers up by property
 * (`handlers[name]`, as this one does) turns `["delete_x"]` back into `"delete_x"` and runs it.
 * The same methods sent as notifications were never judged at all.
 *
 * A real gateway in front of a raw backend that records every message it gets, reached on
 * `/mcp/{backend}` (2025-11-25 session), `/mcp` (aggregated), a 2026-07-28 stateless POST and
 * `/ws/mcp/{backend}`: each such message is refused at the gateway (-32602 under the request's
 * id; a notification 400 -32600), `delete_x` is denied by `access.tools.deny`, and the backend
 * never sees any of it.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionClient } from '../helpers/session-client.js';
import { statelessMeta } from '../helpers/stateless-call.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

type Message = { jsonrpc: '2.0'; id?: string | number; method?: string; params?: Record<string, unknown> };

/** A backend that looks its handlers up by property, the way many hand-written servers do. */
async function startRawBackend(): Promise<{ url: string; received: Message[]; ran: string[]; close(): Promise<void> }> {
  const received: Message[] = [];
  const ran: string[] = [];
  const handlers: Record<string, () => string> = { delete_x: () => 'deleted everything', hello: () => 'hi' };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const m = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Message;
      received.push(m);
      if (m.id === undefined) return void res.writeHead(202).end();
      const name = m.params?.name as string;
      let result: unknown = {};
      if (m.method === 'initialize') result = { protocolVersion: m.params?.protocolVersion, capabilities: { tools: {}, prompts: {}, resources: { subscribe: true } }, serverInfo: { name: 'raw', version: '1' } };
      else if (m.method === 'tools/list') result = { tools: Object.keys(handlers).map((n) => ({ name: n, inputSchema: { type: 'object' } })) };
      else if (m.method === 'tools/call' && handlers[name]) {
        ran.push(String(name));
        result = { content: [{ type: 'text', text: handlers[name]() }] };
      }
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'raw-session' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
  return { url, received, ran, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

let idp: OAuthHandle;
let backend: Awaited<ReturnType<typeof startRawBackend>>;
let gateway: GatewayHandle;
let token: string;

before(async () => {
  [idp, backend] = await Promise.all([startOAuthServer(), startRawBackend()]);
  gateway = await startGateway({
    issuer: idp.issuer,
    backends: [{ name: 'raw', url: backend.url, protocol: '2025-11-25', access: { tools: { deny: ['delete_*'] } } }],
  });
  token = await idp.token({ sub: 'mallory', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([backend?.close(), idp?.stop()]);
});

/** The messages that name a target, with that target not a string. */
const BAD_REQUESTS: Array<{ method: string; params: Record<string, unknown>; member: string }> = [
  { method: 'tools/call', params: { name: ['delete_x'], arguments: {} }, member: 'name' },
  { method: 'tools/call', params: { name: { toString: 'delete_x' } }, member: 'name' },
  { method: 'tools/call', params: { arguments: {} }, member: 'name' },
  { method: 'prompts/get', params: { name: ['secret_prompt'] }, member: 'name' },
  { method: 'resources/read', params: { uri: ['file:///etc/shadow'] }, member: 'uri' },
  { method: 'resources/subscribe', params: { uri: 42 }, member: 'uri' },
];

/** What reached the backend of these methods (a tools/list or initialize is fine). */
const judgedReceived = () => backend.received.filter((m) => ['tools/call', 'prompts/get', 'resources/read', 'resources/subscribe'].includes(m.method ?? ''));

async function expectRefused(res: Response, id: number, member: string, method: string, status: number): Promise<void> {
  const body = (await res.json()) as { id?: unknown; error?: { code: number; message: string } };
  assert.equal(res.status, status, JSON.stringify(body));
  assert.equal(body.id, id);
  assert.equal(body.error?.code, -32602);
  assert.match(String(body.error?.message), new RegExp(`${method} needs params\\.${member} as a string`));
}

describe('a judged target that is not a string, or a judged method sent as a notification, is refused at the gateway', () => {
  for (const path of ['raw', undefined] as const) {
    const where = path ? '/mcp/{backend}' : '/mcp (aggregated)';
    test(`${where}: -32602 under the request's id; as a notification, 400 -32600; nothing reaches the backend`, async () => {
      const client = sessionClient(() => (path ? gateway.endpoint(path) : new URL(`${gateway.url}/mcp`)), 'mallory');
      const sessionId = await client.initialize(token);
      let id = 100;
      for (const bad of BAD_REQUESTS) {
        const params = path ? bad.params : { ...bad.params, ...(typeof bad.params.name === 'object' ? { name: ['raw__delete_x'] } : {}) };
        await expectRefused(await client.post(token, { jsonrpc: '2.0', id: ++id, method: bad.method, params }, sessionId), id, bad.member, bad.method, 200);
      }
      const notification = await client.post(token, { jsonrpc: '2.0', method: 'tools/call', params: { name: path ? 'delete_x' : 'raw__delete_x' } }, sessionId);
      assert.equal(notification.status, 400);
      const refused = (await notification.json()) as { id: unknown; error: { code: number; message: string } };
      assert.equal(refused.id, null);
      assert.equal(refused.error.code, -32600);
      assert.match(refused.error.message, /tools\/call must be sent as a request/);
      // The policy still denies the name given as a string; a string name to an allowed tool runs.
      const denied = (await (await client.post(token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: path ? 'delete_x' : 'raw__delete_x' } }, sessionId)).json()) as { error?: { code: number } };
      assert.equal(denied.error?.code, -32602);
      const hello = (await (await client.post(token, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: path ? 'hello' : 'raw__hello' } }, sessionId)).json()) as { result?: unknown };
      assert.ok(hello.result, JSON.stringify(hello));
      assert.deepEqual(backend.ran.filter((n) => n !== 'hello'), [], 'delete_x never ran');
      assert.deepEqual(judgedReceived().map((m) => m.params?.name), backend.ran.map(() => 'hello'), 'only the allowed call reached the backend');
    });
  }

  test("2026-07-28 stateless POST: 400 -32602 under the request's id (a removed method 404 -32601); a notification 400 -32600", async () => {
    let id = 300;
    for (const bad of BAD_REQUESTS) {
      const res = await fetch(gateway.endpoint('raw'), { method: 'POST', headers: statelessHeaders(token, bad.method), body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: bad.method, params: { ...bad.params, _meta: statelessMeta({}) } }) });
      if (bad.method === 'resources/subscribe') {
        // Removed in 2026-07-28 (SEP-2575): 404 -32601 whatever its params, and never forwarded.
        assert.equal(res.status, 404);
        const answer = (await res.json()) as { id: unknown; error: { code: number } };
        assert.deepEqual([answer.id, answer.error.code], [id, -32601]);
        continue;
      }
      await expectRefused(res, id, bad.member, bad.method, 400);
    }
    const res = await fetch(gateway.endpoint('raw'), { method: 'POST', headers: statelessHeaders(token, 'tools/call', 'hello'), body: JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'hello', _meta: statelessMeta({}) } }) });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { code: number } }).error.code, -32600);
    assert.deepEqual(backend.ran.filter((n) => n !== 'hello'), []);
    assert.ok(judgedReceived().every((m) => m.params?.name === 'hello'));
  });

  test('WebSocket: the error frame answers the request by id; nothing reaches the backend', async () => {
    const url = `${gateway.url.replace('http', 'ws')}/ws/mcp/raw`;
    const socket = new WebSocket(url, 'mcp', { headers: { authorization: `Bearer ${token}` } });
    const frames: Array<{ id?: unknown; result?: unknown; error?: { code: number; message: string } }> = [];
    const waiters: Array<() => void> = [];
    socket.on('message', (data) => {
      frames.push(JSON.parse(String(data)) as (typeof frames)[number]);
      waiters.splice(0).forEach((w) => w());
    });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const answerTo = async (frameId: unknown) => {
      for (let i = 0; i < 100 && !frames.some((f) => f.id === frameId); i++) await new Promise<void>((resolve) => (waiters.push(resolve), setTimeout(resolve, 100)));
      return frames.find((f) => f.id === frameId);
    };
    try {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ws', version: '1' } } }));
      assert.ok((await answerTo(1))?.result);
      socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: ['delete_x'] } }));
      const refused = await answerTo(2);
      assert.equal(refused?.error?.code, -32602);
      assert.match(String(refused?.error?.message), /tools\/call needs params\.name as a string/);
      socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'resources/read', params: { uri: 'file:///etc/shadow' } }));
      const notification = await answerTo(null);
      assert.equal(notification?.error?.code, -32600);
    } finally {
      socket.close();
    }
    assert.deepEqual(backend.ran.filter((n) => n !== 'hello'), []);
    assert.ok(judgedReceived().every((m) => m.params?.name === 'hello'));
  });
});
