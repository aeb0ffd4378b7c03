/**
 * The aggregated endpoint `/mcp` (SPEC §2) with real backends: a paging SDK server
 * (`alpha`, open to tenants acme and globex), server-everything (`beta`, acme only) and a
 * backend that accepts connections and never answers (`slow`). Users are real JWTs from a
 * real OAuth server, with the tenant in the `org` claim; clients are the official SDK.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { startPagingBackend, type PagingBackend } from '../fixtures/paging-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { allPages, allToolNames } from '../helpers/pages.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { watchListenerWarnings } from '../helpers/listener-warnings.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

const FANOUT_TIMEOUT_MS = 1000;

interface Probe {
  client: Client;
  transport: StreamableHTTPClientTransport;
  sampled: number;
  updated: string[];
  logs: unknown[];
  toolListChanged: number;
}

let oauth: OAuthHandle;
let alpha: PagingBackend;
let beta: EverythingHandle;
let silent: net.Server;
let gateway: GatewayHandle;
const probes: Probe[] = [];

async function connect(org: string, sub: string): Promise<Probe> {
  const token = await oauth.token({ sub, aud: gateway.audience, claims: { org } });
  const client = new Client({ name: 'aggregate-test', version: '1.0.0' }, { capabilities: { sampling: {} } });
  const transport = new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const probe: Probe = { client, transport, sampled: 0, updated: [], logs: [], toolListChanged: 0 };
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    probe.sampled++;
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'forty-two' } };
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void probe.updated.push(n.params.uri));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void probe.logs.push(n.params.data));
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void probe.toolListChanged++);
  await withDeadline(client.connect(transport), 15_000, 'connect to /mcp');
  probes.push(probe);
  return probe;
}

const toolNames = allToolNames;

async function waitFor(what: string, check: () => boolean, timeoutMs = 12_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const text = (r: unknown) => ((r as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('');

const textOfContents = (r: { contents: unknown[] }) => String((r.contents[0] as { text?: unknown } | undefined)?.text);

async function rejects(promise: Promise<unknown>, code: number, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof McpError, `expected an McpError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.match(err.message, pattern);
    return true;
  });
}

before(async () => {
  silent = net.createServer(() => {});
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  [oauth, alpha, beta] = await Promise.all([startOAuthServer(), startPagingBackend({ tools: 12, resources: 7, pageSize: 5 }), startEverything()]);
  const port = await freePort();
  gateway = await startGateway({
    issuer: oauth.issuer,
    port,
    backends: [
      { name: 'alpha', url: alpha.url, access: { tenants: ['acme', 'globex'], tools: { deny: ['t12'] } } },
      { name: 'beta', url: beta.url, access: { tenants: ['acme'] } },
      { name: 'slow', url: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/mcp` },
    ],
    overrides: { auth: { issuer: oauth.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], tenantClaim: 'org' }, aggregate: { fanoutTimeout: `${FANOUT_TIMEOUT_MS}ms` } } as never,
  });
});

after(async () => {
  for (const p of probes) await p.client.close().catch(() => {});
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), alpha?.stop(), beta?.stop(), new Promise((r) => silent?.close(r))]);
});

describe('a tenant-A user on /mcp', () => {
  let probe: Probe;
  let directBeta: string[];

  before(async () => {
    const started = Date.now();
    probe = await connect('acme', 'alice');
    // The silent backend costs at most the fan-out timeout, not its own 60 s.
    assert.ok(Date.now() - started < FANOUT_TIMEOUT_MS + 4000, `initialize took ${Date.now() - started} ms`);
    // Same capabilities as the probe: server-everything lists some tools only to clients that can sample.
    const direct = new Client({ name: 'direct', version: '1' }, { capabilities: { sampling: {} } });
    await direct.connect(new StreamableHTTPClientTransport(new URL(beta.url)));
    directBeta = (await direct.listTools()).tools.map((t) => t.name);
    await direct.close();
  });

  test('initialize answers with the union of the members and names the gateway', () => {
    const caps = probe.client.getServerCapabilities()!;
    assert.ok(caps.tools && caps.prompts && caps.resources, 'tools, prompts and resources offered');
    assert.equal(caps.resources?.subscribe, true);
    assert.equal(probe.client.getServerVersion()?.name, 'switchboard');
  });

  test('tools/list walks both backends over several pages, namespaced, without duplicates', async () => {
    const { items, pages } = await toolNames(probe.client);
    // alpha's tool policy hides t12.
    const expected = [...alpha.toolNames.filter((n) => n !== 't12').map((n) => `alpha__${n}`), ...directBeta.map((n) => `beta__${n}`)];
    assert.deepEqual(items, expected);
    assert.equal(new Set(items).size, items.length, 'no duplicates');
    assert.ok(pages >= 4, `paged (${pages} pages)`);
    assert.ok(!items.some((n) => n.startsWith('slow__')), 'the silent backend is left out');
  });

  test('tools of both backends are called through their namespaced names', async () => {
    assert.equal(text(await probe.client.callTool({ name: 'alpha__t03', arguments: { x: 1 } })), 't03:{"x":1}');
    assert.match(text(await probe.client.callTool({ name: 'beta__echo', arguments: { message: 'hi from alice' } })), /hi from alice/);
  });

  test('resources: every page, URIs routed back to their backend, templates and links stay usable', async () => {
    const { items } = await allPages(async (cursor) => {
      const r = await probe.client.listResources(cursor ? { cursor } : {});
      return { items: r.resources.map((x) => x.uri), nextCursor: r.nextCursor };
    });
    for (const uri of alpha.resourceUris) assert.ok(items.includes(`alpha+${uri}`), `${uri} listed`);
    assert.ok(items.some((u) => u.startsWith('beta+demo://')), 'server-everything resources listed');
    assert.equal(new Set(items).size, items.length);
    const read = await probe.client.readResource({ uri: 'alpha+paging://item/5' });
    assert.deepEqual(read.contents, [{ uri: 'alpha+paging://item/5', mimeType: 'text/plain', text: 'item 5' }]);
    const templates = await probe.client.listResourceTemplates();
    assert.ok(templates.resourceTemplates.some((t) => t.uriTemplate === 'alpha+paging://item/{id}'));
    // A URI expanded from the template goes to the same backend.
    assert.equal(textOfContents(await probe.client.readResource({ uri: 'alpha+paging://item/42' })), 'item 42');
    const link = (await probe.client.callTool({ name: 'alpha__link', arguments: {} })) as CallToolResult;
    const uri = (link.content[0] as { uri: string }).uri;
    assert.equal(uri, 'alpha+paging://item/2');
    assert.equal(textOfContents(await probe.client.readResource({ uri })), 'item 2');
  });

  test('prompts are namespaced and routed', async () => {
    const prompts = await probe.client.listPrompts();
    assert.ok(prompts.prompts.some((p) => p.name === 'alpha__greet'));
    const got = await probe.client.getPrompt({ name: 'alpha__greet', arguments: { name: 'Ada' } });
    assert.deepEqual(got.messages[0]!.content, { type: 'text', text: 'Hello, Ada' });
  });

  test('completion/complete is routed by the prompt name or the template URI; logging/setLevel reaches the members', async () => {
    assert.ok(probe.client.getServerCapabilities()?.completions, 'completions offered (server-everything has them)');
    const department = await probe.client.complete({ ref: { type: 'ref/prompt', name: 'beta__completable-prompt' }, argument: { name: 'department', value: 'Eng' } });
    assert.deepEqual(department.completion.values, ['Engineering']);
    const member = await probe.client.complete({
      ref: { type: 'ref/prompt', name: 'beta__completable-prompt' },
      argument: { name: 'name', value: '' },
      context: { arguments: { department: 'Sales' } },
    });
    assert.deepEqual(member.completion.values, ['David', 'Eve', 'Frank']);
    const template = await probe.client.complete({ ref: { type: 'ref/resource', uri: 'beta+demo://resource/dynamic/text/{resourceId}' }, argument: { name: 'resourceId', value: '12' } });
    assert.deepEqual(template.completion.values, ['12']);
    assert.deepEqual(await probe.client.setLoggingLevel('debug'), {});
  });

  test('sampling from the second backend reaches the client and the answer goes back to it', async () => {
    const before = probe.sampled;
    const result = await probe.client.callTool({ name: 'beta__trigger-sampling-request', arguments: { prompt: 'six times seven?', maxTokens: 20 } });
    assert.equal(probe.sampled, before + 1);
    assert.match(JSON.stringify(result), /forty-two/);
  });

  test('notifications from either backend reach the client (updated, list_changed, log), URIs namespaced', async () => {
    await probe.client.callTool({ name: 'alpha__notify', arguments: {} });
    await waitFor('resources/updated from alpha', () => probe.updated.includes('alpha+paging://item/1'));
    await waitFor('log message from alpha', () => probe.logs.includes('paging backend says hello'));
    await waitFor('tools/list_changed from alpha', () => probe.toolListChanged > 0);
    const uri = 'beta+demo://resource/dynamic/text/1';
    await probe.client.subscribeResource({ uri });
    await probe.client.callTool({ name: 'beta__toggle-subscriber-updates', arguments: {} });
    try {
      await waitFor('resources/updated from beta', () => probe.updated.includes(uri));
    } finally {
      await probe.client.callTool({ name: 'beta__toggle-subscriber-updates', arguments: {} });
    }
  });

  test('bad cursors, unknown names and unroutable methods get JSON-RPC errors', async () => {
    await rejects(probe.client.listTools({ cursor: 'not-a-cursor' }), -32602, /cursor/);
    const forged = Buffer.from(JSON.stringify({ b: 'nobody' })).toString('base64url');
    await rejects(probe.client.listTools({ cursor: forged }), -32602, /cursor/);
    await rejects(probe.client.callTool({ name: 'gamma__echo', arguments: {} }), -32602, /Unknown tool/);
    // A tool the backend's policy hides looks like one that does not exist.
    await rejects(probe.client.callTool({ name: 'alpha__t12', arguments: {} }), -32602, /Unknown tool: alpha__t12/);
    await rejects(probe.client.callTool({ name: 'echo', arguments: {} }), -32602, /qualified/);
    await rejects(probe.client.readResource({ uri: 'demo://resource/dynamic/text/1' }), -32602, /qualified/);
  });
});

describe('a tenant-B user', () => {
  test('sees only the backends of its tenant through /mcp, and the others refuse it', async () => {
    const probe = await connect('globex', 'bob');
    const { items } = await toolNames(probe.client);
    assert.deepEqual(items, alpha.toolNames.filter((n) => n !== 't12').map((n) => `alpha__${n}`));
    await rejects(probe.client.callTool({ name: 'beta__echo', arguments: { message: 'x' } }), -32602, /Unknown tool/);
    const token = await oauth.token({ sub: 'bob', aud: gateway.audience, claims: { org: 'globex' } });
    const res = await fetch(`${gateway.url}/mcp/beta`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
    });
    assert.equal(res.status, 403);
  });

  test("cannot use tenant A's aggregated session", async () => {
    const alice = probes[0]!;
    const token = await oauth.token({ sub: 'bob', aud: gateway.audience, claims: { org: 'globex' } });
    const res = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': alice.transport.sessionId!, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(res.status, 404);
  });
});

describe('ending an aggregated session', () => {
  test('DELETE ends the member sessions too', async () => {
    const before = alpha.sessions();
    const probe = await connect('acme', 'carol');
    assert.equal(alpha.sessions(), before + 1);
    await probe.transport.terminateSession();
    await waitFor('the alpha session to end', () => alpha.sessions() === before, 5000);
  });
});

describe('an aggregated session in Redis', () => {
  test('survives a gateway restart: its qualified names and URIs still route', async (t) => {
    const { startRedis } = await import('../helpers/redis.js');
    const redis = await startRedis();
    t.after(() => redis.stop());
    const port = await freePort();
    const options = {
      issuer: oauth.issuer,
      port,
      redisUrl: redis.url,
      backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url }],
    };
    let first: GatewayHandle | undefined = await startGateway(options);
    t.after(() => first?.close());
    const token = await oauth.token({ sub: 'dave', aud: first.audience });
    const client = new Client({ name: 'restart-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${first.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    await withDeadline(client.connect(transport), 15_000, 'connect');
    const sessionId = transport.sessionId!;
    const uri = (await client.listResources()).resources.find((r) => r.uri.startsWith('alpha+'))!.uri;
    await transport.close();
    await first.close();
    first = undefined;

    const second = await startGateway(options);
    t.after(() => second.close());
    const call = async (id: number, method: string, params: unknown) => {
      const res = await fetch(`${second.url}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
      });
      assert.equal(res.status, 200);
      const body = await res.text();
      const json = res.headers.get('content-type')!.startsWith('text/event-stream') ? body.split('\n').find((l) => l.startsWith('data: {'))!.slice(6) : body;
      return JSON.parse(json) as { result?: Record<string, unknown>; error?: unknown };
    };
    const read = await call(1, 'resources/read', { uri });
    assert.deepEqual((read.result!.contents as Array<{ uri: string }>)[0]!.uri, uri);
    const echoed = await call(2, 'tools/call', { name: 'beta__echo', arguments: { message: 'after restart' } });
    assert.match(JSON.stringify(echoed.result), /after restart/);
  });
});

describe('a member backend that forgets its session', () => {
  test('ends the aggregated session (404, as on /mcp/{backend}), and a new session has every backend again', async () => {
    const probe = await connect('acme', 'frank');
    assert.match(text(await probe.client.callTool({ name: 'alpha__t01', arguments: {} })), /^t01:/);
    await alpha.forgetSessions();
    await assert.rejects(probe.client.callTool({ name: 'alpha__t01', arguments: {} }), (err: Error) => {
      assert.match(err.message, /404|not found/i);
      return true;
    });
    const token = await oauth.token({ sub: 'frank', aud: gateway.audience, claims: { org: 'acme' } });
    const res = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': probe.transport.sessionId!, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }),
    });
    assert.equal(res.status, 404, 'the gateway session is gone');
    const again = await connect('acme', 'frank');
    assert.match(text(await again.client.callTool({ name: 'alpha__t01', arguments: {} })), /^t01:/);
    assert.match(text(await again.client.callTool({ name: 'beta__echo', arguments: { message: 'still here' } })), /still here/);
  });
});

describe('a backend that was down when the client connected', () => {
  test('joins the session later, and the client hears tools/list_changed', async (t) => {
    const latePort = await freePort();
    const late = await startGateway({
      issuer: oauth.issuer,
      backends: [
        { name: 'alpha', url: alpha.url },
        { name: 'late', url: `http://127.0.0.1:${latePort}/mcp` },
      ],
      overrides: { aggregate: { fanoutTimeout: '1s', rejoinInterval: '300ms' } },
    });
    t.after(() => late.close());
    const token = await oauth.token({ sub: 'gina', aud: late.audience });
    let listChanged = 0;
    const client = new Client({ name: 'late-test', version: '1.0.0' });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void listChanged++);
    await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(`${late.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 15_000, 'connect');
    t.after(() => client.close());
    assert.equal(client.getServerCapabilities()?.tools?.listChanged, true, 'the lists may change: a backend is missing');
    assert.ok(!(await toolNames(client)).items.some((n) => n.startsWith('late__')), 'the missing backend has no tools yet');

    const backend = await startPagingBackend({ tools: 2, resources: 0, pageSize: 10, port: latePort });
    t.after(() => backend.stop());
    // The session's next messages start an attempt (at most one per rejoinInterval).
    const deadline = Date.now() + 15_000;
    while (!listChanged) {
      assert.ok(Date.now() < deadline, 'notifications/tools/list_changed arrived');
      await client.ping();
      await new Promise((r) => setTimeout(r, 200));
    }
    const { items } = await toolNames(client);
    assert.ok(items.includes('late__t01') && items.includes('alpha__t01'), items.join(', '));
    assert.equal(text(await client.callTool({ name: 'late__t02', arguments: { z: 1 } })), 't02:{"z":1}');
    assert.equal(backend.sessions(), 1, 'one backend session for the client session');
  });
});

describe('an aggregated endpoint of twelve members', () => {
  test('the merged stream, the lists, a broadcast and the end reach every member, with no listener-leak warning', async (t) => {
    // Twelve members behind /mcp: the merged GET asks each member for its stream at once,
    // all for the one client request. That is fan-out, not a leak, and must not make Node
    // print a MaxListenersExceededWarning into the gateway's log.
    const warnings = watchListenerWarnings();
    t.after(() => warnings.stop());
    const names = Array.from({ length: 12 }, (_, i) => `m${String(i + 1).padStart(2, '0')}`);
    const wide = await startGateway({ issuer: oauth.issuer, backends: names.map((name) => ({ name, url: alpha.url })) });
    t.after(() => wide.close());
    const token = await oauth.token({ sub: 'twelve-members', aud: wide.audience });
    const client = new Client({ name: 'aggregate-twelve', version: '1.0.0' });
    const logs: unknown[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params.data));
    await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(`${wide.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 15_000, 'connect to /mcp');
    t.after(() => client.close().catch(() => {}));
    // The last member's log message arrives on the merged stream: its GET was opened with the others'.
    await client.callTool({ name: 'm12__notify', arguments: {} });
    await waitFor('the log message of the twelfth member', () => logs.includes('paging backend says hello'));
    // The other requests that reach every member: a list walked to its end, a broadcast, and
    // the session's end.
    const tools: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100 && (page === 0 || cursor); page++) {
      const listed = await client.listTools(cursor ? { cursor } : {});
      tools.push(...listed.tools.map((tool) => tool.name));
      cursor = listed.nextCursor;
    }
    assert.ok(tools.includes('m01__t01') && tools.includes('m12__t12'), 'tools of the first and the twelfth member listed');
    await client.setLoggingLevel('info');
    await (client.transport as StreamableHTTPClientTransport).terminateSession();
    assert.deepEqual(await warnings.messages(), []);
  });
});
