/**
 * Virtual servers (issue 31 §1) on two real gateway replicas sharing one real Redis, every
 * client request alternating between them (so a session started on replica A continues on
 * replica B). One server, `triage`, is built from real backends:
 *
 * - `issues` (2025-11-25, v1 SDK): `create_issue` renamed `file_bug`, described anew, `owner`
 *   and `repo` fixed (hidden from the model), the optional `labels` hidden; its prompt
 *   `triage` as `triage_bug`; its resources under `repo://acme/` only;
 * - `docs` (2026-07-28 only, v2 SDK): `search_docs` as `find_docs`, optional `limit` hidden;
 *   `admin_reset` selected too, but denied by the backend's tool policy;
 * - `crm` (needs the user's own account, `upstreamAuth`, lists without it): `whoami`, which leads to the link;
 * - `pages` (lists in pages of 2): `t05`, on its last page, as `fifth`; `notify`;
 * - `counter` (resumable streams): `count`, its pace pinned, as `count_slowly`.
 *
 * A second server, `vault-desk`, selects a tool of `vault`, which refuses everything (initialize
 * included) until the account is linked: the gateway's `connect` tool stands in for it.
 *
 * Clients: the v1 SDK (2025-11-25 sessions) and the v2 SDK pinned to 2026-07-28 (stateless,
 * through the gateway's bridge), and a raw WebSocket client. All must see the same server.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { startPagingBackend, type PagingBackend } from '../fixtures/paging-backend.js';
import { startDocsBackend, startIssuesBackend, type VirtualBackend } from '../fixtures/virtual-backends.js';
import { withDeadline } from '../helpers/deadline.js';
import { eventually, linkRequired } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';
import { statelessMeta } from '../helpers/stateless-call.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';
import { messageOf, SseReader, type SseEvent } from '../helpers/sse-client.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { refused } from '../helpers/refused.js';

let idp: OAuthHandle;
let provider: OAuthHandle;
let redis: RedisHandle;
let issues: VirtualBackend;
let docs: VirtualBackend;
let crm: ProtectedBackend;
let counter: { url: string; stop(): Promise<void> };
/** Refuses everything, initialize included, without the user's own token: its tools are unknown until the link. */
let vault: ProtectedBackend;
let pages: PagingBackend;
let set: ReplicaSet;
const closers: Array<() => Promise<unknown>> = [];

const TRIAGE = {
  name: 'triage',
  title: 'Triage desk',
  instructions: 'File bugs with file_bug; look things up with find_docs.',
  tools: [
    { from: 'issues.create_issue', as: 'file_bug', description: 'File a bug against the acme web app', arguments: { owner: { value: 'acme' }, repo: { value: 'web' }, labels: { hide: true } } },
    { from: 'docs.search_docs', as: 'find_docs', title: 'Find docs', arguments: { limit: { hide: true } } },
    { from: 'crm.whoami' },
    { from: 'issues.announce' },
    // Selected, but the backend's tool policy denies it: the policy, which sees the real name, wins.
    { from: 'docs.admin_reset' },
    // A long call with progress, its pace pinned: resumed with Last-Event-ID on the other replica.
    { from: 'counter.count', as: 'count_slowly', arguments: { intervalMs: { value: 400 } } },
    // On the member's last page: the server walks every page and answers with one.
    { from: 'pages.t05', as: 'fifth' },
    // Sends resources/updated for a resource the server does not offer, then tools/list_changed.
    { from: 'pages.notify' },
  ],
  prompts: [{ from: 'issues.triage', as: 'triage_bug' }],
  resources: [{ from: 'issues', uriPrefix: 'repo://acme/' }],
};

before(async () => {
  [idp, provider, redis, issues, docs] = await Promise.all([startOAuthServer(), startOAuthServer(), startRedis(), startIssuesBackend(), startDocsBackend()]);
  [crm, vault, counter, pages] = await Promise.all([
    startProtectedBackend(provider.issuer, { openListing: true }),
    startProtectedBackend(provider.issuer),
    startResumableBackend(),
    startPagingBackend({ tools: 5, resources: 1, pageSize: 2 }),
  ]);
  const acme = { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['repo'] };
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    auth: { login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    backends: [
      { name: 'issues', url: issues.url },
      { name: 'docs', url: docs.url, access: { tools: { deny: ['admin_reset'] } } },
      { name: 'counter', url: counter.url },
      { name: 'pages', url: pages.url },
      { name: 'crm', url: crm.url, upstreamAuth: acme },
      { name: 'vault', url: vault.url, upstreamAuth: acme },
    ],
    extra: { servers: [TRIAGE, { name: 'vault-desk', tools: [{ from: 'vault.whoami', as: 'who_am_i' }] }], secrets: { cookieKey: randomBytes(32).toString('base64url'), tokenKey: randomBytes(32).toString('base64url') } },
  });
});

after(async () => {
  for (const close of closers) await close().catch(() => {});
  await set?.stop();
  await Promise.allSettled([issues?.close(), docs?.close(), crm?.stop(), vault?.stop(), counter?.stop(), pages?.stop(), redis?.stop(), provider?.stop(), idp?.stop()]);
});

const contentText = (r: { contents: unknown[] }) => (r.contents[0] as { text?: string } | undefined)?.text;

const textOf = (r: unknown) => ((r as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('');

async function token(sub: string, aud = set.audience): Promise<string> {
  return idp.token({ sub, aud });
}

/** A v1 SDK client (2025-11-25 sessions) of `/mcp/{server}`, its requests alternating between the replicas. */
async function sessionClient(sub: string, server = 'triage'): Promise<Client> {
  const client = new Client({ name: 'virtual-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const transport = new StreamableHTTPClientTransport(set.endpoint(0, server), { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${await token(sub)}` } } });
  await withDeadline(client.connect(transport), 15_000, 'connect to /mcp/triage');
  closers.push(() => client.close());
  return client;
}

/** A v2 SDK client pinned to 2026-07-28 (no session; the gateway bridges), alternating between the replicas. */
async function statelessClient(sub: string): Promise<V2Client> {
  const client = new V2Client({ name: 'virtual-v2', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new V2Transport(set.endpoint(0, 'triage'), { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${await token(sub)}` } } }));
  closers.push(() => client.close());
  return client;
}

/** What every client of `/mcp/triage` must see listed, whichever revision it speaks. */
function assertTriageTools(tools: Array<Record<string, unknown>>): void {
  assert.deepEqual(
    tools.map((t) => t.name),
    ['file_bug', 'find_docs', 'whoami', 'announce', 'count_slowly', 'fifth', 'notify'],
  );
  const fileBug = tools[0]!;
  assert.equal(fileBug.description, 'File a bug against the acme web app');
  const schema = fileBug.inputSchema as { properties: Record<string, unknown>; required?: string[] };
  assert.deepEqual(Object.keys(schema.properties), ['title'], 'owner and repo (fixed) and labels (hidden) are not advertised');
  assert.deepEqual(schema.required, ['title']);
  assert.ok(fileBug.outputSchema, 'the outputSchema stays');
  assert.deepEqual(fileBug.annotations, { title: 'Create issue', destructiveHint: false });
  assert.deepEqual(fileBug._meta, { ui: { resourceUri: 'issues+ui://issues/form.html' } });
  const findDocs = tools[1]!;
  assert.equal(findDocs.title, 'Find docs');
  assert.equal(findDocs.description, 'Full-text search over the documentation');
  assert.deepEqual(Object.keys((findDocs.inputSchema as { properties: object }).properties), ['query']);
}

describe('a 2025-11-25 client of a virtual server, on two replicas', () => {
  let client: Client;
  before(async () => {
    client = await sessionClient('alice');
  });

  test('initialize names the server; tools are selected, renamed, described, with fixed and hidden arguments gone', async () => {
    assert.equal(client.getServerVersion()?.name, 'triage');
    assert.equal(client.getServerVersion()?.title, 'Triage desk');
    assert.equal(client.getInstructions(), TRIAGE.instructions);
    const { tools, nextCursor } = await client.listTools();
    assert.equal(nextCursor, undefined);
    assertTriageTools(tools as unknown as Array<Record<string, unknown>>);
    assert.equal(textOf(await client.callTool({ name: 'fifth', arguments: { n: 5 } })), 't05:{"n":5}');
    await refused(client.listTools({ cursor: 'made-up' }), -32602, /cursor/);
  });

  test('a call gets the fixed arguments; a client value for a fixed or hidden one is refused with -32602', async () => {
    issues.calls.length = 0;
    const result = (await client.callTool({ name: 'file_bug', arguments: { title: 'Login is broken' } })) as CallToolResult;
    assert.deepEqual(issues.calls, [{ tool: 'create_issue', args: { owner: 'acme', repo: 'web', title: 'Login is broken' } }]);
    assert.deepEqual(result.structuredContent, { number: 7, owner: 'acme', repo: 'web' });
    await refused(client.callTool({ name: 'file_bug', arguments: { title: 'x', owner: 'evil' } }), -32602, /argument "owner" of tool "file_bug" is fixed/);
    await refused(client.callTool({ name: 'file_bug', arguments: { title: 'x', labels: ['p1'] } }), -32602, /argument "labels" of tool "file_bug" is not offered/);
    assert.equal(issues.calls.length, 1, 'refused calls never reach the backend');
    docs.calls.length = 0;
    assert.equal(JSON.parse(textOf(await client.callTool({ name: 'find_docs', arguments: { query: 'login' } }))).query, 'login');
    assert.deepEqual(docs.calls, [{ tool: 'search_docs', args: { query: 'login' } }]);
  });

  test('tools the server does not select cannot be called, by either name', async () => {
    for (const name of ['delete_repo', 'issues__delete_repo', 'issues__create_issue', 'create_issue', 'docs__admin_reset']) {
      await refused(client.callTool({ name, arguments: { owner: 'acme', repo: 'web' } }), -32602, /Unknown tool/);
    }
    assert.ok(!issues.calls.some((c) => c.tool === 'delete_repo'));
  });

  test('the backend\'s tool policy sees the real tool: a selected tool it denies is neither listed nor called', async () => {
    assert.ok(!(await client.listTools()).tools.some((t) => t.name === 'admin_reset'));
    await refused(client.callTool({ name: 'admin_reset', arguments: {} }), -32602, /^(MCP error -32602: )?Unknown tool: admin_reset$/);
    assert.ok(!docs.calls.some((c) => c.tool === 'admin_reset'), 'the backend never ran it');
  });

  test('prompts by name, resources by URI prefix; the renamed tool\'s UI resource stays readable', async () => {
    assert.deepEqual((await client.listPrompts()).prompts.map((p) => p.name), ['triage_bug']);
    const prompt = await client.getPrompt({ name: 'triage_bug', arguments: { issue: 'crash' } });
    assert.deepEqual(prompt.messages[0]!.content, { type: 'text', text: 'Triage: crash' });
    await refused(client.getPrompt({ name: 'secret' }), -32602, /Unknown prompt/);
    await refused(client.complete({ ref: { type: 'ref/prompt', name: 'secret' }, argument: { name: 'x', value: '' } }), -32602, /Unknown prompt: secret/);
    await refused(client.complete({ ref: { type: 'ref/resource', uri: 'issues+repo://other/{x}' }, argument: { name: 'x', value: '' } }), -32602, /Unknown resource/);
    assert.deepEqual((await client.listResources()).resources.map((r) => r.uri), ['issues+repo://acme/readme']);
    assert.equal(contentText(await client.readResource({ uri: 'issues+repo://acme/readme' })), 'readme of acme');
    await refused(client.readResource({ uri: 'issues+repo://other/readme' }), -32602, /Unknown resource/);
    const ui = await client.readResource({ uri: 'issues+ui://issues/form.html' });
    assert.equal(contentText(ui), '<form>issue</form>');
  });

  test('a member that needs the user\'s account leads to the link (-32042), as on /mcp', async () => {
    const elicitation = await linkRequired(client, 'whoami');
    assert.match(elicitation.url, /\/connect\?elicitationId=/);
  });

  test('a member\'s list_changed reaches the client on the merged stream', async () => {
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    assert.equal(textOf(await client.callTool({ name: 'announce', arguments: {} })), 'announced');
    for (let i = 0; i < 100 && changed === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(changed, 1);
  });

  test('a member\'s notification about a resource the server does not offer is not passed on; its list_changed is', async () => {
    let changed = 0;
    const updated: string[] = [];
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
    assert.equal(textOf(await client.callTool({ name: 'notify', arguments: {} })), 'notified');
    // Sent after resources/updated on the same member stream: once it is here, the other would be too.
    for (let i = 0; i < 100 && changed === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(changed, 1);
    assert.deepEqual(updated, [], 'pages+paging://item/1 is not selected by this server');
  });
});

describe('a virtual server over a backend that refuses everything until the user links the account', () => {
  test('its tools are unknown: the gateway\'s connect tool is offered in their place, and it and the selected tool lead to the link', async () => {
    const client = await sessionClient('erin', 'vault-desk');
    const { tools } = await client.listTools();
    assert.deepEqual(
      tools.map((t) => t.name),
      ['vault__connect'],
    );
    for (const name of ['vault__connect', 'who_am_i']) {
      const elicitation = await linkRequired(client, name);
      assert.match(elicitation.url, /\/connect\?elicitationId=/, name);
    }
    await refused(client.callTool({ name: 'triage__connect', arguments: {} }), -32602, /Unknown tool/);
  });
});

describe('resuming a virtual server\'s call stream on the other replica (Last-Event-ID)', () => {
  test('a call begun on replica A, its connection dropped, is resumed on replica B: every progress event once, then the result', async () => {
    const auth = `Bearer ${await token('dora')}`;
    const headers = (extra: Record<string, string> = {}) => ({ authorization: auth, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25', ...extra });
    const init = await fetch(set.endpoint(0, 'triage'), {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
    });
    assert.equal(init.status, 200);
    await init.text();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')! };
    assert.equal((await fetch(set.endpoint(1, 'triage'), { method: 'POST', headers: headers(session), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).status, 202);
    const controller = new AbortController();
    const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'count_slowly', arguments: { steps: 5 }, _meta: { progressToken: 'p7' } } };
    const res = await fetch(set.endpoint(0, 'triage'), { method: 'POST', headers: headers(session), signal: controller.signal, body: JSON.stringify(call) });
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const progress = (events: SseEvent[]) => events.map(messageOf).filter((m) => m?.method === 'notifications/progress').map((m) => (m!.params as { progress: number }).progress);
    let wanted = 2;
    const first = await new SseReader(res).until((e) => progress([e]).length > 0 && --wanted === 0, 15_000);
    controller.abort();
    const lastId = [...first].reverse().find((e) => e.id)!.id!;
    const resumed = await fetch(set.endpoint(1, 'triage'), { headers: headers({ ...session, accept: 'text/event-stream', 'last-event-id': lastId }) });
    assert.equal(resumed.status, 200);
    const rest = await new SseReader(resumed).until((e) => messageOf(e)?.id === 7, 20_000);
    assert.deepEqual([...progress(first), ...progress(rest)], [1, 2, 3, 4, 5], 'every progress event exactly once, in order');
    assert.match(JSON.stringify(messageOf(rest.at(-1)!)?.result), /counted 5/);
  });
});

describe('a 2026-07-28 client of the same virtual server', () => {
  test('the same tools and arguments; fixed values set, client values refused; the link', async () => {
    const client = await statelessClient('bob');
    const { tools } = await client.listTools();
    assertTriageTools(tools as unknown as Array<Record<string, unknown>>);
    issues.calls.length = 0;
    await client.callTool({ name: 'file_bug', arguments: { title: 'From 2026' } });
    assert.deepEqual(issues.calls, [{ tool: 'create_issue', args: { owner: 'acme', repo: 'web', title: 'From 2026' } }]);
    await refused(client.callTool({ name: 'file_bug', arguments: { title: 'x', repo: 'other' } }), -32602, /argument "repo" of tool "file_bug" is fixed/);
    assert.equal(issues.calls.length, 1);
    docs.calls.length = 0;
    await client.callTool({ name: 'find_docs', arguments: { query: 'sso' } });
    assert.deepEqual(docs.calls, [{ tool: 'search_docs', args: { query: 'sso' } }]);
    const ui = await client.readResource({ uri: 'issues+ui://issues/form.html' });
    assert.equal((ui.contents[0] as { text?: string }).text, '<form>issue</form>');
    // The unlinked member leads to the link as it does through /mcp: -32042 with the gateway's connect URL.
    const link = (await client.callTool({ name: 'whoami', arguments: {} }).then(
      (r) => r,
      (e: unknown) => e,
    )) as { code?: number; data?: { elicitations?: Array<{ mode: string; url: string }> } };
    assert.equal(link.code, -32042, JSON.stringify(link));
    assert.equal(link.data?.elicitations?.[0]?.mode, 'url');
    assert.match(link.data!.elicitations![0]!.url, /\/connect\?elicitationId=/);
  });
});

describe('a 2026-07-28 list of a virtual server on the raw wire', () => {
  test('is never cacheable across users: cacheScope private (its members are each user\'s)', async () => {
    const res = await fetch(set.endpoint(1, 'triage'), {
      method: 'POST',
      headers: statelessHeaders(await token('hank'), 'tools/list'),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: statelessMeta({}) } }),
    });
    const text = await res.text();
    const body = res.headers.get('content-type')?.startsWith('text/event-stream') ? text.split('\n').filter((l) => l.startsWith('data: ')).at(-1)!.slice(6) : text;
    const result = (JSON.parse(body) as { result: { tools: Array<{ name: string }>; cacheScope?: string; resultType?: string } }).result;
    assert.equal(result.resultType, 'complete');
    assert.equal(result.cacheScope, 'private');
    assert.ok(result.tools.some((t) => t.name === 'file_bug'));
  });
});

describe('a 2026-07-28 client listening to a virtual server', () => {
  test('subscriptions/listen: acknowledged, and a selected member\'s tools/list_changed arrives', async () => {
    const client = await statelessClient('gina');
    const heard: string[] = [];
    client.setNotificationHandler('notifications/tools/list_changed', (n) => void heard.push(n.method));
    const subscription = await client.listen({ toolsListChanged: true });
    try {
      assert.deepEqual(subscription.honoredFilter, { toolsListChanged: true });
      assert.equal(textOf(await client.callTool({ name: 'announce', arguments: {} })), 'announced');
      await eventually('tools/list_changed on the listen', () => heard.length > 0);
    } finally {
      await subscription.close();
    }
  });
});

describe('a virtual server over WebSocket', () => {
  test('/ws/mcp/triage: initialize names the server, tools/list is the selection', async () => {
    const socket = new WebSocket(`${set.replicas[1]!.url.replace('http', 'ws')}/ws/mcp/triage`, 'mcp', { headers: { authorization: `Bearer ${await token('frank')}` } });
    closers.push(async () => socket.close());
    const answers = new Map<number, Record<string, unknown>>();
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { id?: number };
      if (typeof message.id === 'number') answers.set(message.id, message as Record<string, unknown>);
    });
    await withDeadline(new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject)), 10_000, 'WebSocket handshake');
    const ask = async (id: number, method: string, params: unknown) => {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      for (let i = 0; i < 100 && !answers.has(id); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      return answers.get(id)?.result as Record<string, unknown>;
    };
    const init = await ask(1, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ws', version: '1' } });
    assert.equal((init.serverInfo as { name: string }).name, 'triage');
    socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const listed = await ask(2, 'tools/list', {});
    assertTriageTools(listed.tools as Array<Record<string, unknown>>);
  });
});

describe('the virtual server is an endpoint of its own (RFC 9728)', () => {
  test('its protected-resource metadata names /mcp/triage, and a token made out to it opens it', async () => {
    const base = set.replicas[0]!.url;
    const metadata = (await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp/triage`)).json()) as { resource: string };
    assert.equal(metadata.resource, `${set.audience}/triage`);
    const own = await token('carol', `${set.audience}/triage`);
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const post = (path: string) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${own}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(init) });
    const opened = await post('/mcp/triage');
    assert.equal(opened.status, 200, await opened.clone().text());
    await opened.body?.cancel();
    const other = await post('/mcp/issues');
    assert.equal(other.status, 401, 'a token for /mcp/triage opens no other endpoint');
    await other.body?.cancel();
  });
});
