/**
 * Per-backend access policy and tool lists, end to end (SPEC §3 `backends[].access`): a real
 * OAuth server mints tokens with tenant, group and scope claims; two server-everything
 * processes and the scripted backend (JSON answers, records every tools/call) sit behind the
 * gateway; the official SDK client and plain HTTP requests talk to it.
 *
 *   alpha     server-everything #1   tenants [acme]
 *   beta      server-everything #2   tools.deny [get-*, trigger-*]  (answers SSE)
 *   eng-only  server-everything #2   claims { groups: [eng] }
 *   scoped    server-everything #1   scopes [crm]
 *   scripted  scripted backend       tools.allow [ok, url-*], deny [url-required-sse]  (answers JSON)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startScriptedBackend, type ScriptedBackend } from '../fixtures/misbehaving-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

let oauth: OAuthHandle | undefined;
let one: EverythingHandle | undefined;
let two: EverythingHandle | undefined;
let scripted: ScriptedBackend | undefined;
let gateway: GatewayHandle | undefined;
/** tenant acme, group eng, scope crm */
let alice = '';
/** tenant globex (as an array), group sales, no crm scope */
let bob = '';
const clients: Client[] = [];

before(async () => {
  [oauth, one, two, scripted] = await Promise.all([startOAuthServer(), startEverything(), startEverything(), startScriptedBackend()]);
  const port = await freePort();
  gateway = await startGateway({
    issuer: oauth.issuer,
    port,
    overrides: { auth: { issuer: oauth.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], tenantClaim: 'org' } },
    backends: [
      { name: 'alpha', url: one.url, access: { tenants: ['acme'] } },
      { name: 'beta', url: two.url, access: { tools: { deny: ['get-*', 'trigger-*'] } } },
      { name: 'eng-only', url: two.url, access: { claims: { groups: ['eng'] } } },
      { name: 'scoped', url: one.url, access: { scopes: ['crm'] } },
      { name: 'scripted', url: scripted.url, timeout: '2s', access: { tools: { allow: ['ok', 'url-*'], deny: ['url-required-sse'] } } },
    ],
  });
  [alice, bob] = await Promise.all([
    oauth.token({ sub: 'alice', aud: gateway.audience, scope: 'mcp crm', claims: { org: 'acme', groups: ['ops', 'eng'] } }),
    oauth.token({ sub: 'bob', aud: gateway.audience, scope: 'mcp', claims: { org: ['globex'], groups: 'sales' } }),
  ]);
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), one?.stop(), two?.stop(), scripted?.close()]);
});

async function connect(backend: string, token: string): Promise<Client> {
  const client = new Client({ name: 'policy-test', version: '1.0.0' });
  client.onerror = () => {};
  const transport = new StreamableHTTPClientTransport(gateway!.endpoint(backend), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 1 },
  });
  await withDeadline(client.connect(transport), 10_000, `connect to ${backend}`);
  clients.push(client);
  return client;
}

function textOf(result: unknown): string {
  return ((result as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

const INIT = (protocolVersion = '2025-11-25') => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });

async function post(backend: string, token: string, body: string, headers: Record<string, string> = {}) {
  return fetch(gateway!.endpoint(backend), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
    signal: AbortSignal.timeout(10_000),
  });
}

async function assertAccessDenied(res: Response, what: string): Promise<void> {
  assert.equal(res.status, 403, what);
  assert.equal(res.headers.get('www-authenticate'), null, `${what}: no scope would help, so no challenge`);
  const body = (await res.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
  assert.equal(body.jsonrpc, '2.0');
  assert.equal(body.error.code, -32015, what);
  assert.match(body.error.message, /Access denied/);
  assert.doesNotMatch(body.error.message.replace(/backend "[^"]+"/, ''), /acme|globex|eng|sales/, `${what}: names neither tenants nor claim values`);
}

async function policyDenials(): Promise<string> {
  const text = await (await fetch(`${gateway!.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith('switchboard_policy_denials_total{')).join('\n');
}

describe('backend access', () => {
  test('a tenant-acme user initializes and calls tools on the restricted and the open backend', async () => {
    for (const name of ['alpha', 'beta']) {
      const client = await connect(name, alice);
      assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: `hi ${name}` } })), `Echo: hi ${name}`);
    }
  });

  test('a tenant-globex user gets 403 on the acme backend for POST, GET and DELETE, and may use the open one', async () => {
    await assertAccessDenied(await post('alpha', bob, INIT()), 'POST initialize');
    // The guard runs before the session lookup: even alice's real session id gets 403, not 404.
    const aliceInit = await post('alpha', alice, INIT());
    const sessionId = aliceInit.headers.get('mcp-session-id')!;
    await aliceInit.body?.cancel();
    assert.ok(sessionId);
    const headers = { authorization: `Bearer ${bob}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
    await assertAccessDenied(await fetch(gateway!.endpoint('alpha'), { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } }), 'GET');
    await assertAccessDenied(await fetch(gateway!.endpoint('alpha'), { method: 'DELETE', headers }), 'DELETE');
    const del = await fetch(gateway!.endpoint('alpha'), { method: 'DELETE', headers: { ...headers, authorization: `Bearer ${alice}` } });
    assert.equal(del.status, 204, 'alice still owns her session');

    await assert.rejects(connect('alpha', bob), (err: Error) => /403/.test(String(err)) || /Access denied/.test(err.message));
    const client = await connect('beta', bob);
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'bob' } })), 'Echo: bob');
    assert.match(await policyDenials(), /switchboard_policy_denials_total\{backend="alpha",reason="tenant"\} [1-9]/);
  });

  test('a claim-restricted backend admits only the group', async () => {
    const client = await connect('eng-only', alice);
    assert.ok((await client.listTools()).tools.length > 0);
    await assertAccessDenied(await post('eng-only', bob, INIT()), 'wrong group');
    assert.match(await policyDenials(), /backend="eng-only",reason="claim"/);
  });

  test('a missing backend scope → 403 insufficient_scope with a challenge', async () => {
    await connect('scoped', alice);
    const res = await post('scoped', bob, INIT());
    assert.equal(res.status, 403);
    assert.match(res.headers.get('www-authenticate') ?? '', /insufficient_scope/);
    assert.match(res.headers.get('www-authenticate') ?? '', /crm/);
    await res.body?.cancel();
  });

  test('an unknown backend is still 404', async () => {
    const res = await post('nope', bob, INIT());
    assert.equal(res.status, 404);
    await res.body?.cancel();
  });
});

describe('tool lists', () => {
  test('tools/list over an SSE answer lacks the denied tools; calling one is "Unknown tool"', async () => {
    const direct = new Client({ name: 'direct', version: '1.0.0' });
    await direct.connect(new StreamableHTTPClientTransport(new URL(two!.url)));
    const all = (await direct.listTools()).tools.map((t) => t.name);
    await direct.close();
    assert.ok(all.includes('get-sum') && all.includes('echo') && all.some((n) => n.startsWith('trigger-')), all.join());

    const client = await connect('beta', alice);
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(names, all.filter((n) => !n.startsWith('get-') && !n.startsWith('trigger-')));
    await assert.rejects(client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }), (err: unknown) => {
      assert.ok(err instanceof McpError, String(err));
      assert.equal(err.code, -32602);
      assert.match(err.message, /Unknown tool: get-sum/);
      return true;
    });
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'still here' } })), 'Echo: still here');
  });

  test('raw answer to tools/list: the backend answers one SSE event, the client gets it filtered as JSON, and the session goes on', async () => {
    const init = await post('beta', alice, INIT());
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.text();
    const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
    await (await post('beta', alice, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), headers)).body?.cancel();
    for (const id of ['list-1', 'list-2']) {
      const res = await post('beta', alice, JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list' }), headers);
      // server-everything answers with an SSE stream of one event, the response; the gateway
      // sends that message alone, with its length (issue 29; the SSE filtering itself:
      // tool-policy.test.ts).
      assert.equal(res.headers.get('content-type')?.split(';')[0], 'application/json');
      const text = await res.text();
      assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(text));
      const answer = JSON.parse(text) as { id: string; result: { tools: Array<{ name: string }> } };
      assert.equal(answer.id, id);
      assert.ok(answer.result.tools.length > 0 && answer.result.tools.every((t) => !t.name.startsWith('get-')), text);
    }
  });

  test('over a JSON answer: the allow list filters tools/list, and a hidden tool is refused without reaching the backend', async () => {
    const client = await connect('scripted', alice);
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['ok', 'url-required']);
    const before = scripted!.calls.length;
    for (const name of ['hang', 'url-required-sse', 'no-such-tool']) {
      const started = Date.now();
      await assert.rejects(client.callTool({ name, arguments: {} }), (err: unknown) => err instanceof McpError && err.code === -32602 && err.message.includes(`Unknown tool: ${name}`));
      assert.ok(Date.now() - started < 1_500, `${name} was answered at once (the backend would hang)`);
    }
    assert.deepEqual(scripted!.calls.slice(before), [], 'nothing reached the backend');
    assert.equal(textOf(await client.callTool({ name: 'ok', arguments: { text: 'x' } })), 'ok: x');
    assert.deepEqual(scripted!.calls.slice(before), ['ok']);
    assert.match(await policyDenials(), /backend="scripted",reason="tool"\} 3/);
  });

  test('a 2025-03-26 batch: hidden calls get errors, the rest is forwarded', async () => {
    const init = await post('scripted', alice, INIT('2025-03-26'));
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.text();
    const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-03-26' };
    const call = (id: number, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { text: String(id) } } });
    const before = scripted!.calls.length;

    const mixed = await post('scripted', alice, JSON.stringify([call(1, 'ok'), call(2, 'hang')]), headers);
    assert.equal(mixed.status, 200);
    assert.deepEqual(await mixed.json(), [
      { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'ok: 1' }] } },
      { jsonrpc: '2.0', id: 2, error: { code: -32602, message: 'Unknown tool: hang' } },
    ]);
    const hiddenOnly = await post('scripted', alice, JSON.stringify([call(3, 'hang'), call(4, 'fail-500')]), headers);
    assert.deepEqual(await hiddenOnly.json(), [
      { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Unknown tool: hang' } },
      { jsonrpc: '2.0', id: 4, error: { code: -32602, message: 'Unknown tool: fail-500' } },
    ]);
    const withNotification = await post('scripted', alice, JSON.stringify([{ jsonrpc: '2.0', method: 'notifications/initialized' }, call(5, 'hang')]), headers);
    assert.equal(withNotification.status, 200);
    assert.deepEqual(await withNotification.json(), [{ jsonrpc: '2.0', id: 5, error: { code: -32602, message: 'Unknown tool: hang' } }]);
    assert.deepEqual(scripted!.calls.slice(before), ['ok']);
  });
});
