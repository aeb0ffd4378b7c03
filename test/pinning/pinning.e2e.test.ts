/**
 * Tool-definition pinning (issue 31 §2) on two real gateway replicas sharing one real Redis,
 * with real SDK backends that change their tool `search` between sessions (a description
 * asking for a secret, a new argument): test/fixtures/mutable-tools-backend.ts.
 *
 * - `logged` (2025-11-25 backend, mode log), `held` (hold), `blocked` (block): v1 SDK clients
 *   whose requests alternate between the replicas;
 * - `docs` (2026-07-28 backend, mode block): a v2 SDK client pinned to 2026-07-28.
 *
 * First sight records, the change is seen by a later session, each mode acts, approval by
 * the command line (`switchboard pins approve`, a process of its own) and by the admin route
 * of a replica's metrics listener reaches a live session on the other replica as
 * `tools/list_changed`; a lockfile written by `switchboard pins export` pins a third gateway.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { SEARCH_V1, SEARCH_V2, startMutableBackend, type MutableBackend } from '../fixtures/mutable-tools-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { freePort } from '../helpers/free-port.js';
import { eventually } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { refused } from '../helpers/refused.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSX = import.meta.resolve('tsx');
const ADMIN_TOKEN = randomBytes(24).toString('base64url');

let idp: OAuthHandle;
let redis: RedisHandle;
let logged: MutableBackend;
let held: MutableBackend;
let blocked: MutableBackend;
let docs: MutableBackend;
let set: ReplicaSet;
let dir: string;
const configFiles: string[] = [];
const metricsUrls: string[] = [];
const closers: Array<() => Promise<unknown>> = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sb-pinning-'));
  [idp, redis, logged, held, blocked, docs] = await Promise.all([startOAuthServer(), startRedis(), startMutableBackend('2025-11-25'), startMutableBackend('2025-11-25'), startMutableBackend('2025-11-25'), startMutableBackend('2026-07-28')]);
  const metricsPorts = await Promise.all([freePort(), freePort()]);
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [
      { name: 'logged', url: logged.url, pinning: { mode: 'log' } },
      { name: 'held', url: held.url, pinning: { mode: 'hold' } },
      { name: 'blocked', url: blocked.url, pinning: { mode: 'block' } },
      { name: 'docs', url: docs.url, protocol: '2026-07-28', pinning: { mode: 'block' } },
    ],
    extra: { audit: { sink: 'file', path: join(dir, 'audit.jsonl') }, admin: { token: ADMIN_TOKEN } },
    writeConfig: async (index, config) => {
      const file = join(dir, `replica-${index}.yaml`);
      metricsUrls[index] = `http://127.0.0.1:${metricsPorts[index]}`;
      await writeFile(file, stringify({ ...config, metrics: { listen: { host: '127.0.0.1', port: metricsPorts[index] } } }));
      configFiles[index] = file;
      return file;
    },
  });
});

after(async () => {
  for (const close of closers) await close().catch(() => {});
  await set?.stop();
  await Promise.allSettled([logged?.close(), held?.close(), blocked?.close(), docs?.close(), redis?.stop(), idp?.stop()]);
});

/** Runs `switchboard pins …` as its own process. */
function pins(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', TSX, join(ROOT, 'src/cli.ts'), 'pins', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: '' }, timeout: 30_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A v1 SDK client (2025-11-25 session) of `/mcp/{backend}` (`*`: the aggregated `/mcp`): alternating between the replicas, or on one only. */
async function sessionClient(backend: string, only?: number): Promise<Client> {
  const client = new Client({ name: 'pinning-test', version: '1.0.0' });
  const headers = { Authorization: `Bearer ${await idp.token({ sub: 'alice', aud: set.audience })}` };
  const url = backend === '*' ? new URL(`${set.replicas[only ?? 0]!.url}/mcp`) : set.endpoint(only ?? 0, backend);
  const transport = new StreamableHTTPClientTransport(url, only === undefined ? { fetch: set.roundRobinFetch(), requestInit: { headers } } : { requestInit: { headers } });
  await withDeadline(client.connect(transport), 15_000, `connect to /mcp/${backend}`);
  closers.push(() => client.close());
  return client;
}

/** A v2 SDK client pinned to 2026-07-28 (no session), alternating between the replicas. */
async function statelessClient(backend: string): Promise<V2Client> {
  const client = new V2Client({ name: 'pinning-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new V2Transport(set.endpoint(0, backend), { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${await idp.token({ sub: 'bob', aud: set.audience })}` } } }));
  closers.push(() => client.close());
  return client;
}

type Listed = { tools: Array<{ name: string; description?: string; inputSchema?: { properties?: Record<string, unknown> } }> };
const search = (listed: Listed) => listed.tools.find((t) => t.name === 'search');

/** `switchboard_tool_definition_changes_total{backend,mode}` summed over both replicas. */
async function changesCounted(backend: string, mode: string): Promise<number> {
  let sum = 0;
  for (const url of metricsUrls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`switchboard_tool_definition_changes_total{backend="${backend}",mode="${mode}"}`));
    sum += line ? Number(line.split(' ').pop()) : 0;
  }
  return sum;
}

const approveRoute = (body: unknown, token?: string) =>
  fetch(`${metricsUrls[0]}/admin/pins/approve`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });

describe('tool-definition pinning on two replicas, both revisions', () => {
  let lockfile: string;

  test('first sight records each definition, served as the backend sends it; pins export writes them', async () => {
    for (const backend of ['logged', 'held', 'blocked']) {
      const listed = await (await sessionClient(backend)).listTools();
      assert.equal(search(listed)?.description, SEARCH_V1, backend);
    }
    assert.equal(search(await (await statelessClient('docs')).listTools())?.description, SEARCH_V1);
    lockfile = join(dir, 'pins.json');
    const exported = await pins(['export', '--config', configFiles[0]!, '--out', lockfile]);
    assert.equal(exported.code, 0, exported.stderr);
    const file = JSON.parse(await readFile(lockfile, 'utf8')) as { schema: string; backends: Record<string, Record<string, { fingerprint: string; tool: { description: string } }>> };
    assert.equal(file.schema, 'switchboard.pins/v1');
    assert.deepEqual(Object.keys(file.backends).sort(), ['blocked', 'docs', 'held', 'logged']);
    assert.equal(file.backends.logged!.search!.tool.description, SEARCH_V1);
    assert.match(file.backends.docs!.stable!.fingerprint, /^[0-9a-f]{64}$/);
    assert.equal(await changesCounted('logged', 'log'), 0, 'nothing changed yet');
  });

  test('the backends change search between sessions', () => {
    for (const b of [logged, held, blocked, docs]) b.revision = 2;
  });

  test('log: the new definition is served; the change is audited and counted once, whichever replica lists it again', async () => {
    const client = await sessionClient('logged');
    assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    for (let i = 0; i < 3; i++) assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    await client.callTool({ name: 'search', arguments: { query: 'q', note: 'n' } });
    assert.deepEqual(logged.calls.at(-1), { tool: 'search', args: { query: 'q', note: 'n' } });
    assert.equal(await changesCounted('logged', 'log'), 1);
    const audit = (await readFile(join(dir, 'audit.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const changes = audit.filter((r) => r.event === 'tool-definition-changed' && r.backend === 'logged');
    assert.equal(changes.length, 1);
    assert.equal(changes[0]!.schema, 'switchboard.audit/v1');
    assert.equal(changes[0]!.tool, 'search');
    assert.equal(changes[0]!.decision, 'allow');
    assert.notEqual(changes[0]!.pinnedSha256, changes[0]!.seenSha256);
  });

  test('hold: the pinned definition is served; calls reach the backend only when the pinned inputSchema accepts them', async () => {
    const client = await sessionClient('held');
    const listed = search(await client.listTools());
    assert.equal(listed?.description, SEARCH_V1);
    assert.deepEqual(Object.keys(listed?.inputSchema?.properties ?? {}), ['query'], 'the new argument is not advertised');
    await client.callTool({ name: 'search', arguments: { query: 'q' } });
    assert.deepEqual(held.calls.at(-1), { tool: 'search', args: { query: 'q' } });
    const before = held.calls.length;
    await refused(client.callTool({ name: 'search', arguments: { query: 'q', note: 'secret' } }), -32602, /tool "search" of backend "held".*pinned inputSchema/);
    await refused(client.callTool({ name: 'search', arguments: {} }), -32602, /tool "search" of backend "held"/);
    assert.equal(held.calls.length, before, 'refused calls never reached the backend');
    assert.equal(await changesCounted('held', 'hold'), 1);
  });

  test('block: the changed tool leaves the lists and its calls are refused naming backend and tool, on both revisions', async () => {
    const client = await sessionClient('blocked');
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(names, ['stable']);
    const before = blocked.calls.length;
    await refused(client.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, /Tool "search" of backend "blocked" is blocked/);
    assert.equal(blocked.calls.length, before);
    await client.callTool({ name: 'stable', arguments: {} });
    assert.equal(blocked.calls.at(-1)?.tool, 'stable', 'unchanged tools keep working');

    // The same through the aggregated /mcp, whose members are the pinned backends.
    const aggregate = await sessionClient('*');
    const aggregated = await allTools(aggregate);
    const aggregatedNames = aggregated.map((t) => t.name);
    assert.ok(aggregatedNames.includes('blocked__stable') && !aggregatedNames.includes('blocked__search') && !aggregatedNames.includes('docs__search'), aggregatedNames.join(', '));
    assert.equal(aggregated.find((t) => t.name === 'held__search')?.description, SEARCH_V1);
    assert.equal(aggregated.find((t) => t.name === 'logged__search')?.description, SEARCH_V2);
    await refused(aggregate.callTool({ name: 'blocked__search', arguments: { query: 'q' } }), -32602, /Tool "search" of backend "blocked" is blocked/);
    assert.equal(blocked.calls.length, before + 1, 'only the stable call reached the backend');

    const v2 = await statelessClient('docs');
    assert.deepEqual((await v2.listTools()).tools.map((t) => t.name), ['stable']);
    const docsBefore = docs.calls.length;
    await refused(v2.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, /Tool "search" of backend "docs" is blocked/);
    assert.equal(docs.calls.length, docsBefore);
  });

  test('pins list shows the changes waiting for approval', async () => {
    const listed = await pins(['list', '--config', configFiles[1]!]);
    assert.equal(listed.code, 0, listed.stderr);
    const rows = listed.stdout.trim().split('\n').map((l) => l.split('\t').slice(0, 2).join(' '));
    assert.deepEqual(rows.sort(), ['blocked search', 'docs search', 'held search', 'logged search']);
  });

  test('approval by the command line: the new definition is the pin, and a live session on a replica hears tools/list_changed', async () => {
    const baseline = await streamsOpen(1);
    const client = await sessionClient('blocked', 1);
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    assert.equal(search(await client.listTools()), undefined);
    await waitForStream(1, baseline);
    const approved = await pins(['approve', '--config', configFiles[0]!, '--backend', 'blocked']);
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, /approved blocked: search/);
    await eventually('tools/list_changed after approval', () => changed > 0);
    assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    await client.callTool({ name: 'search', arguments: { query: 'after', note: 'approved' } });
    assert.deepEqual(blocked.calls.at(-1), { tool: 'search', args: { query: 'after', note: 'approved' } });
    const again = await pins(['approve', '--config', configFiles[0]!, '--backend', 'blocked']);
    assert.match(again.stdout, /nothing waits for approval on blocked/);
  });

  test('approval by the admin route: 401 without the token; the pin follows on every replica', async () => {
    assert.equal((await approveRoute({ backend: 'held' })).status, 401);
    assert.equal((await approveRoute({ backend: 'held' }, `${ADMIN_TOKEN}x`)).status, 401);
    assert.equal((await approveRoute({ backend: 'nope' }, ADMIN_TOKEN)).status, 404);
    assert.equal((await approveRoute({ tool: 'search' }, ADMIN_TOKEN)).status, 400);
    const baseline = await streamsOpen(1);
    const client = await sessionClient('held', 1);
    const aggregate = await sessionClient('*', 1);
    let changed = 0;
    let aggregateChanged = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    aggregate.setNotificationHandler(ToolListChangedNotificationSchema, () => void aggregateChanged++);
    assert.equal(search(await client.listTools())?.description, SEARCH_V1);
    await waitForStream(1, baseline + 1);
    const res = await approveRoute({ backend: 'held', tool: 'search' }, ADMIN_TOKEN);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { backend: 'held', approved: ['search'] });
    await eventually('tools/list_changed on replica 1 after approval on replica 0', () => changed > 0);
    await eventually('tools/list_changed on a /mcp session on replica 1', () => aggregateChanged > 0);
    assert.equal((await allTools(aggregate)).find((t) => t.name === 'held__search')?.description, SEARCH_V2);
    assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    await client.callTool({ name: 'search', arguments: { query: 'q', note: 'now allowed' } });
    assert.deepEqual(held.calls.at(-1), { tool: 'search', args: { query: 'q', note: 'now allowed' } });

    const v2 = await statelessClient('docs');
    assert.deepEqual(await (await approveRoute({ backend: 'docs' }, ADMIN_TOKEN)).json(), { backend: 'docs', approved: ['search'] });
    assert.equal(search(await v2.listTools())?.description, SEARCH_V2);
    await v2.callTool({ name: 'search', arguments: { query: 'v2' } });
    assert.deepEqual(docs.calls.at(-1), { tool: 'search', args: { query: 'v2' } });
  });

  test('lockfile: the file is the pins (read-only); a tool the file lacks counts as changed', async () => {
    const redisLock = await startReplicas({
      count: 1,
      redisUrl: redis.url,
      issuer: idp.issuer,
      backends: [
        // The file holds revision 1 of `logged`, which now serves revision 2.
        { name: 'logged', url: logged.url, pinning: { mode: 'block', lockfile } },
        // No entry in the file at all: every tool is new to it.
        { name: 'unlisted', url: blocked.url, pinning: { mode: 'block', lockfile } },
      ],
      writeConfig: async (_index, config) => {
        const file = join(dir, 'locked.yaml');
        await writeFile(file, stringify(config));
        configFiles[2] = file;
        return file;
      },
    });
    try {
      const token = await idp.token({ sub: 'carol', aud: redisLock.audience });
      const open = async (backend: string) => {
        const client = new Client({ name: 'lockfile-test', version: '1.0.0' });
        await client.connect(new StreamableHTTPClientTransport(redisLock.endpoint(0, backend), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
        closers.push(() => client.close());
        return client;
      };
      const client = await open('logged');
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['stable']);
      await refused(client.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, /backend "logged" is blocked/);
      assert.deepEqual((await (await open('unlisted')).listTools()).tools, []);
      const approve = await pins(['approve', '--config', configFiles[2]!, '--backend', 'logged']);
      assert.notEqual(approve.code, 0);
      assert.match(approve.stderr, /lockfile/);
      const exported = await pins(['export', '--config', configFiles[2]!]);
      const stored = JSON.parse(exported.stdout) as { backends: Record<string, object> };
      assert.deepEqual(stored.backends, { logged: {}, unlisted: {} }, 'first sight recorded nothing');
    } finally {
      await redisLock.stop();
    }
  });
});

/** Every page of a session's tool list (`/mcp` answers a page per member). */
async function allTools(client: Client): Promise<Listed['tools']> {
  const tools: Listed['tools'] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 20; page++) {
    const listed = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...listed.tools);
    cursor = listed.nextCursor;
    if (cursor === undefined) return tools;
  }
  assert.fail('more than 20 pages');
}

async function streamsOpen(index: number): Promise<number> {
  const text = await (await fetch(`${metricsUrls[index]}/metrics`)).text();
  return Number(/^switchboard_sse_streams_open (\d+)/m.exec(text)?.[1] ?? 0);
}

/** Waits until replica `index` relays more SSE streams than `baseline` (the new client's standalone GET). */
async function waitForStream(index: number, baseline: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await streamsOpen(index)) > baseline) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`replica ${index} opened no SSE stream`);
}
