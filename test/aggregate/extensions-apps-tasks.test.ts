/**
 * MCP Apps, tasks and extension capabilities through the aggregated `/mcp` (issue 18), with
 * the real packages: `@modelcontextprotocol/server-basic-vanillajs` (the MCP Apps example
 * server) as backend `apps`, and `@modelcontextprotocol/server-everything` (tasks, with its
 * task-augmented `simulate-research-query`) as backend `everything`, behind two gateway
 * replicas on one Redis with every request alternating between them.
 *
 * - A host reads the UI resource by the URI the tool names in `_meta.ui.resourceUri`
 *   (qualified like every other URI), gets the `text/html;profile=mcp-app` page, and calls
 *   the tool.
 * - Tasks: the capability is merged; a task-augmented call creates a task whose id carries
 *   its backend; `tasks/get` polls it, `tasks/result` fetches the call's result,
 *   `tasks/cancel` cancels another, `tasks/list` lists them — from either replica.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CancelTaskResultSchema, CreateTaskResultSchema, GetTaskPayloadResultSchema, GetTaskResultSchema, ListTasksResultSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { LOOPBACK_PRELOAD_URL } from '../../src/dev/loopback-preload.js';
import { spawnChild, waitUntil, type ChildHandle } from '../helpers/child.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { allPages } from '../helpers/pages.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

const APPS_ENTRY = fileURLToPath(new URL('../../node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js', import.meta.url));
const UI_EXTENSION = 'io.modelcontextprotocol/ui';

let redis: RedisHandle;
let idp: OAuthHandle;
let everything: EverythingHandle;
let apps: ChildHandle;
let replicas: ReplicaSet;

before(async () => {
  const port = await freePort();
  [redis, idp, everything, apps] = await Promise.all([
    startRedis(),
    startOAuthServer(),
    startEverything(),
    // Its Streamable HTTP server calls listen(PORT) without a host: the preload binds it to loopback.
    spawnChild({ name: 'server-basic-vanillajs', command: process.execPath, args: ['--import', LOOPBACK_PRELOAD_URL, APPS_ENTRY], env: { PORT: String(port), NODE_OPTIONS: '' }, ready: (line) => line.includes('listening') }),
  ]);
  const appsUrl = `http://127.0.0.1:${port}/mcp`;
  await waitUntil(async () => ((await fetch(appsUrl, { method: 'GET' }).then((r) => r.status, () => 0)) > 0 ? true : undefined), { what: 'the apps server', timeoutMs: 10_000, intervalMs: 100 });
  replicas = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [
      { name: 'apps', url: appsUrl },
      { name: 'everything', url: everything.url },
    ],
    extra: { limits: { rateLimit: { max: 100_000 } } },
  });
});

after(async () => {
  await replicas?.stop();
  await Promise.allSettled([apps?.stop(), everything?.stop(), idp?.stop(), redis?.stop()]);
});

async function connect(sub: string, capabilities: Record<string, unknown>): Promise<Client> {
  const token = await idp.token({ sub, aud: replicas.audience });
  const client = new Client({ name: 'apps-host', version: '1.0.0' }, { capabilities });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', replicas.replicas[0]!.url), { fetch: replicas.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

test('an MCP App renders through /mcp: the UI resource is read by the URI the tool names, and the tool is called', { timeout: 90_000 }, async () => {
  const client = await connect('host-user', { extensions: { [UI_EXTENSION]: { mimeTypes: ['text/html;profile=mcp-app'] } } });
  try {
    const { items } = await allPages(async (cursor) => {
      const page = await client.listTools(cursor ? { cursor } : {});
      return { items: page.tools, nextCursor: page.nextCursor };
    });
    const tool = items.find((t: Tool) => t.name === 'apps__get-time');
    assert.ok(tool, `apps__get-time listed among ${items.length} tools`);
    const meta = tool._meta as { ui?: { resourceUri?: string }; 'ui/resourceUri'?: string };
    assert.equal(meta.ui?.resourceUri, 'apps+ui://get-time/mcp-app.html');
    assert.equal(meta['ui/resourceUri'], 'apps+ui://get-time/mcp-app.html');

    const read = await client.readResource({ uri: meta.ui!.resourceUri! });
    const [page] = read.contents as Array<{ uri: string; mimeType?: string; text?: string }>;
    assert.equal(page!.uri, 'apps+ui://get-time/mcp-app.html');
    assert.equal(page!.mimeType, 'text/html;profile=mcp-app');
    assert.ok((page!.text ?? '').length > 10_000, 'the whole page came through');

    const called = await client.callTool({ name: 'apps__get-time', arguments: {} });
    assert.match(String((called.structuredContent as { time?: string } | undefined)?.time), /^\d{4}-\d{2}-\d{2}T/);
  } finally {
    await client.close();
  }
});

test('tasks through /mcp: create, poll, fetch the result, cancel another, list — requests alternating between replicas', { timeout: 90_000 }, async () => {
  const client = await connect('task-user', {});
  try {
    assert.ok(client.getServerCapabilities()?.tasks, 'the tasks capability is merged into the answer');
    const create = (topic: string) =>
      client.request({ method: 'tools/call', params: { name: 'everything__simulate-research-query', arguments: { topic }, task: { ttl: 60_000 } } }, CreateTaskResultSchema);
    const first = await create('tides');
    const second = await create('comets');
    for (const created of [first, second]) assert.match(created.task.taskId, /^everything__/);

    const cancelled = await client.request({ method: 'tasks/cancel', params: { taskId: second.task.taskId } }, CancelTaskResultSchema);
    assert.equal(cancelled.taskId, second.task.taskId);
    assert.equal(cancelled.status, 'cancelled');

    const done = await waitUntil(
      async () => {
        const task = await client.request({ method: 'tasks/get', params: { taskId: first.task.taskId } }, GetTaskResultSchema);
        assert.equal(task.taskId, first.task.taskId);
        return task.status === 'completed' ? task : undefined;
      },
      { what: 'the research task to complete', timeoutMs: 30_000, intervalMs: 500 },
    );
    assert.equal(done.status, 'completed');
    const result = await client.request({ method: 'tasks/result', params: { taskId: first.task.taskId } }, GetTaskPayloadResultSchema);
    assert.match(JSON.stringify(result), /tides/);

    const listed = await client.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema);
    const ids = listed.tasks.map((t) => t.taskId);
    assert.ok(ids.includes(first.task.taskId) && ids.includes(second.task.taskId), `both tasks listed: ${ids.join(', ')}`);
  } finally {
    await client.close();
  }
});
