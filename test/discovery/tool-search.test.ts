/**
 * Tool search for big catalogs (issue 31 §3) on two real gateway replicas sharing one real
 * Redis, every client request alternating between them. Behind `/mcp`: three real SDK
 * backends of 100 tools each (test/fixtures/tool-catalog.ts: GitHub, Jira and Slack, AWS and
 * Google Cloud), open to users with the scope `catalog` (303 tools with `issues`), and `issues` (3 tools) open to all.
 * `discovery.threshold` is 50 on `/mcp`; two virtual servers have their own threshold.
 *
 * A CEL rule denies rebooting the instance `i-prod`; another hides every `cloud` tool from the
 * user `dave` (he sees 203 tools, above the threshold too, where `alice` sees 303). The audit
 * trail goes to a file.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { startCatalogBackend, type CatalogBackend } from '../fixtures/catalog-backend.js';
import { startIssuesBackend, type VirtualBackend } from '../fixtures/virtual-backends.js';
import { waitUntil } from '../helpers/child.js';
import { withDeadline } from '../helpers/deadline.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { QUERIES } from './search-queries.js';

let idp: OAuthHandle;
let redis: RedisHandle;
let github: CatalogBackend, work: CatalogBackend, cloud: CatalogBackend;
let issues: VirtualBackend;
let set: ReplicaSet;
let dir: string;
const closers: Array<() => Promise<unknown>> = [];

const SERVERS = [
  {
    name: 'ops',
    discovery: { threshold: 3 },
    tools: [{ from: 'cloud.rebootEc2Instance', as: 'restart_server', arguments: { region: { value: 'eu-west-1' } } }, { from: 'cloud.listEc2Instances' }, { from: 'cloud.tailCloudwatchLogs' }, { from: 'github.merge_pull_request' }],
  },
  { name: 'small', discovery: { threshold: 50 }, tools: [{ from: 'cloud.listS3Buckets' }, { from: 'issues.create_issue' }] },
];

before(async () => {
  [idp, redis, github, work, cloud, issues] = await Promise.all([startOAuthServer(), startRedis(), startCatalogBackend('github'), startCatalogBackend('work'), startCatalogBackend('cloud'), startIssuesBackend()]);
  dir = await mkdtemp(join(tmpdir(), 'sb-search-'));
  const scoped = { access: { scopes: ['catalog'] } };
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [
      { name: 'github', url: github.url, ...scoped },
      { name: 'work', url: work.url, ...scoped },
      { name: 'cloud', url: cloud.url, ...scoped },
      { name: 'issues', url: issues.url },
    ],
    extra: {
      discovery: { threshold: 50 },
      servers: SERVERS,
      policy: {
        rules: [
          { name: 'not-prod', effect: 'deny', when: 'mcp.backend == "cloud" && mcp.tool.name == "rebootEc2Instance" && mcp.tool.arguments.instanceId == "i-prod"' },
          { name: 'no-cloud-for-dave', effect: 'deny', when: 'jwt.sub == "dave" && mcp.backend == "cloud"' },
        ],
      },
      audit: { sink: 'file', path: join(dir, 'audit.jsonl') },
    },
  });
});

after(async () => {
  for (const close of closers) await close().catch(() => {});
  await set?.stop();
  await Promise.allSettled([github?.close(), work?.close(), cloud?.close(), issues?.close(), redis?.stop(), idp?.stop()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

const token = (sub: string, scope = 'catalog') => idp.token({ sub, aud: set.audience, scope });
const textOf = (r: unknown) => ((r as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('');
/** JSON-RPC requests the three catalog backends received, all methods together. */
const backendRequests = () => [github, work, cloud].reduce((n, b) => n + [...b.requests.values()].reduce((a, c) => a + c, 0), 0);
const rejectsWith = (code: number) => (err: unknown) => err instanceof McpError && err.code === code;

/** A v1 SDK client (2025-11-25 sessions) of `/mcp` or `/mcp/{server}`, its requests alternating between the replicas. */
async function sessionClient(sub: string, scope?: string, server?: string): Promise<Client> {
  const client = new Client({ name: 'search-test', version: '1.0.0' });
  const url = server ? set.endpoint(0, server) : new URL('/mcp', set.replicas[0]!.url);
  const transport = new StreamableHTTPClientTransport(url, { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${await token(sub, scope)}` } } });
  await withDeadline(client.connect(transport), 15_000, `connect to ${url.pathname}`);
  closers.push(() => client.close());
  return client;
}

async function search(client: Client | V2Client, query: string, limit?: number): Promise<Array<{ name: string; description?: string; inputSchema: unknown }>> {
  const result = (await client.callTool({ name: 'search_tools', arguments: limit === undefined ? { query } : { query, limit } })) as CallToolResult;
  const structured = result.structuredContent as { tools: Array<{ name: string; description?: string; inputSchema: unknown }> };
  if (structured.tools.length) assert.deepEqual(JSON.parse(textOf(result)), structured, 'the text is the structured content, for clients that read only text');
  else assert.match(textOf(result), /^No tool matches/);
  return structured.tools;
}

async function auditRecords(): Promise<Array<Record<string, unknown>>> {
  const text = await readFile(join(dir, 'audit.jsonl'), 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('/mcp with 300 tools and discovery.threshold 50 (2025-11-25 sessions, two replicas)', () => {
  let client: Client;
  before(async () => {
    client = await sessionClient('alice');
  });

  test('tools/list shows exactly search_tools and call_tool', async () => {
    const { tools, nextCursor } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['search_tools', 'call_tool']);
    assert.equal(nextCursor, undefined);
    assert.match(tools[0]!.description!, /among the 303 tools/);
    assert.deepEqual(tools[0]!.inputSchema.required, ['query']);
    assert.deepEqual(tools[1]!.inputSchema.required, ['name']);
  });

  test('20 natural queries each find the right tool in the top 3, with its description and input schema', async () => {
    const misses: string[] = [];
    for (const [query, expected] of QUERIES) {
      const found = await search(client, query, 3);
      if (!found.some((t) => t.name === expected)) misses.push(`${query} → ${found.map((t) => t.name).join(', ')} (expected ${expected})`);
    }
    assert.deepEqual(misses, []);
    const [first] = await search(client, 'restart a virtual machine', 1);
    assert.equal(first!.name, 'cloud__rebootEc2Instance');
    assert.equal(first!.description, 'Reboot (restart) an EC2 virtual machine.');
    assert.deepEqual((first!.inputSchema as { required: string[] }).required, ['region', 'instanceId']);
  });

  test('searches reach no backend once each replica holds the list', async () => {
    // The list is kept per replica: each reads it once (the first search it serves, if it served no tools/list).
    await search(client, 'warm one replica');
    await search(client, 'warm the other');
    const before = backendRequests();
    for (const [query] of QUERIES.slice(0, 10)) await search(client, query);
    assert.equal(backendRequests(), before, 'ten searches, no backend request');
  });

  test('call_tool reaches the backend with the arguments and the progress token; the found tool can be called directly too', async () => {
    cloud.calls.length = 0;
    const progress: unknown[] = [];
    const viaCallTool = await client.callTool({ name: 'call_tool', arguments: { name: 'cloud__rebootEc2Instance', arguments: { region: 'eu-west-1', instanceId: 'i-dev' } } }, undefined, { onprogress: (p) => progress.push(p.progress) });
    assert.deepEqual(JSON.parse(textOf(viaCallTool)), { tool: 'rebootEc2Instance', args: { region: 'eu-west-1', instanceId: 'i-dev' } });
    const direct = await client.callTool({ name: 'cloud__rebootEc2Instance', arguments: { region: 'eu-west-1', instanceId: 'i-test' } });
    assert.equal(JSON.parse(textOf(direct)).args.instanceId, 'i-test');
    assert.deepEqual(cloud.calls.map((c) => [c.tool, c.args.instanceId, typeof c.progressToken]), [['rebootEc2Instance', 'i-dev', 'number'], ['rebootEc2Instance', 'i-test', 'undefined']]);
    assert.deepEqual(progress, [1], 'the progress of the inner call reached the client under the outer call');
  });

  test('a CEL rule denies a tool through call_tool as directly; the audit records name the real backend and tool', async () => {
    const before = cloud.calls.length;
    const prod = { region: 'eu-west-1', instanceId: 'i-prod' };
    await assert.rejects(client.callTool({ name: 'call_tool', arguments: { name: 'cloud__rebootEc2Instance', arguments: prod } }), rejectsWith(-32015));
    await assert.rejects(client.callTool({ name: 'cloud__rebootEc2Instance', arguments: prod }), rejectsWith(-32015));
    assert.equal(cloud.calls.length, before, 'neither reached the backend');
    // Each replica is a process of its own that writes its records at the end of the turn that
    // made them (src/ops/audit-file.ts), so the answer can reach the client first: wait, bounded.
    let records: Array<Record<string, unknown>> = [];
    const denials = () => records.filter((r) => r.decision === 'deny');
    await waitUntil(
      async () => {
        records = (await auditRecords()).filter((r) => r.method === 'tools/call');
        return denials().length >= 2 ? true : undefined;
      },
      { what: 'both refusals in the audit file', timeoutMs: 5_000, details: () => JSON.stringify(records) },
    );
    const denied = denials();
    assert.equal(denied.length, 2, JSON.stringify(records));
    for (const r of denied) assert.deepEqual([r.backend, r.tool, r.rule, r.endpoint], ['cloud', 'rebootEc2Instance', 'not-prod', '/mcp']);
    const allowedReboots = records.filter((r) => r.decision === 'allow' && r.tool === 'rebootEc2Instance');
    assert.equal(allowedReboots.length, 2, 'the call_tool call and the direct one: one record each, naming the real tool');
    assert.ok(allowedReboots.every((r) => r.backend === 'cloud' && r.outcome === 'ok'));
    assert.ok(!records.some((r) => r.tool === 'call_tool' || r.tool === 'search_tools'), 'the gateway tools are not recorded as tools of a backend');
  });

  test('bad arguments of the gateway tools are -32602; an unknown tool through call_tool gets the answer a direct call gets', async () => {
    await assert.rejects(client.callTool({ name: 'search_tools', arguments: {} }), rejectsWith(-32602));
    await assert.rejects(client.callTool({ name: 'search_tools', arguments: { query: 'x', limit: 0 } }), rejectsWith(-32602));
    await assert.rejects(client.callTool({ name: 'call_tool', arguments: { name: 'search_tools' } }), rejectsWith(-32602));
    const viaCallTool = await client.callTool({ name: 'call_tool', arguments: { name: 'cloud__noSuchTool', arguments: {} } });
    assert.equal(viaCallTool.isError, true, 'the backend answers for a tool it does not have');
    assert.deepEqual(viaCallTool, await client.callTool({ name: 'cloud__noSuchTool', arguments: {} }));
  });
  test('a tools/list_changed on the session stream makes the next search read the list again, whichever replica serves it', async () => {
    const notified = new Promise<void>((resolve) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()));
    await search(client, 'warm one replica');
    await search(client, 'warm the other');
    const lists = () => github.requests.get('tools/list') ?? 0;
    const before = lists();
    await client.callTool({ name: 'call_tool', arguments: { name: 'issues__announce', arguments: {} } });
    await withDeadline(notified, 15_000, 'tools/list_changed from issues');
    // The store is marked as the notification passes the gateway: a few searches at most until one reads the list.
    for (let i = 0; i < 20 && lists() === before; i++) await search(client, 'restart a virtual machine');
    assert.equal(lists(), before + 1, 'one search read the list again');
    for (let i = 0; i < 4; i++) await search(client, 'restart a virtual machine');
    assert.equal(lists(), before + 1, 'the same tools: the list each replica keeps is current again');
  });
});

describe('two users above the threshold with different access (issue 41 §2)', () => {
  test("each user's search_tools finds only their own tools: a list or index built from one user's tools never reaches the other", async () => {
    // Both on replica 0, interleaved: the one process keeps both users' lists and the indexes built from them.
    const onReplica0 = async (sub: string) => {
      const client = new Client({ name: 'search-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', set.replicas[0]!.url), { requestInit: { headers: { Authorization: `Bearer ${await token(sub)}` } } }));
      closers.push(() => client.close());
      return client;
    };
    const alice = await onReplica0('alice-2');
    const dave = await onReplica0('dave');
    const described = async (client: Client) => (await client.listTools()).tools[0]!.description!;
    assert.match(await described(alice), /among the 303 tools/);
    assert.match(await described(dave), /among the 203 tools/);
    for (let round = 0; round < 2; round++) {
      for (const query of ['restart a virtual machine', 'list s3 buckets', 'tail cloudwatch logs']) {
        assert.ok((await search(alice, query, 5)).some((t) => t.name.startsWith('cloud__')), `alice finds cloud tools for "${query}"`);
        const found = await search(dave, query, 50);
        assert.ok(!found.some((t) => t.name.startsWith('cloud__')), `dave found ${found.map((t) => t.name).join(', ')}`);
      }
    }
    await assert.rejects(dave.callTool({ name: 'call_tool', arguments: { name: 'cloud__listS3Buckets', arguments: {} } }), rejectsWith(-32602));
  });
});

describe('below the threshold nothing changes', () => {
  test('a user who sees 3 tools on /mcp gets them listed, and no search tools', async () => {
    const client = await sessionClient('bob', 'mcp');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['issues__announce', 'issues__create_issue', 'issues__delete_repo']);
    await assert.rejects(client.callTool({ name: 'search_tools', arguments: { query: 'issue' } }), rejectsWith(-32602));
  });

  test('a virtual server under its threshold lists its tools as configured', async () => {
    const client = await sessionClient('alice', 'catalog', 'small');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['listS3Buckets', 'create_issue']);
  });
});

describe('a virtual server with discovery', () => {
  test('above its threshold it lists the two tools, searches its own offered names, and call_tool applies its fixed arguments', async () => {
    const client = await sessionClient('alice', 'catalog', 'ops');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['search_tools', 'call_tool']);
    const found = await search(client, 'restart a server', 3);
    assert.equal(found[0]!.name, 'restart_server');
    assert.deepEqual((found[0]!.inputSchema as { required: string[] }).required, ['instanceId'], 'the fixed region is not advertised');
    assert.ok(!(await search(client, 'create a jira ticket')).some((t) => t.name.includes('jira')), 'only what the server offers');
    cloud.calls.length = 0;
    await client.callTool({ name: 'call_tool', arguments: { name: 'restart_server', arguments: { instanceId: 'i-web' } } });
    assert.deepEqual(cloud.calls.map((c) => c.args), [{ region: 'eu-west-1', instanceId: 'i-web' }]);
    await assert.rejects(client.callTool({ name: 'call_tool', arguments: { name: 'restart_server', arguments: { instanceId: 'i-web', region: 'us-east-1' } } }), rejectsWith(-32602));
  });
});

describe('a 2026-07-28 client (stateless, through the bridge) gets the same', () => {
  test('tools/list, search_tools and call_tool on /mcp', async () => {
    const client = new V2Client({ name: 'search-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    const url = new URL('/mcp', set.replicas[0]!.url);
    await client.connect(new V2Transport(url, { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${await token('carol')}` } } }));
    closers.push(() => client.close());
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['search_tools', 'call_tool']);
    const found = await search(client, 'post a message in a slack channel', 3);
    assert.ok(found.some((t) => t.name === 'work__slackCreateMessage'), JSON.stringify(found.map((t) => t.name)));
    work.calls.length = 0;
    const result = await client.callTool({ name: 'call_tool', arguments: { name: 'work__slackCreateMessage', arguments: { workspace: 'acme', name: 'hello' } } });
    assert.deepEqual(JSON.parse(textOf(result)), { tool: 'slackCreateMessage', args: { workspace: 'acme', name: 'hello' } });
    assert.deepEqual(work.calls.map((c) => c.tool), ['slackCreateMessage']);
  });
});
