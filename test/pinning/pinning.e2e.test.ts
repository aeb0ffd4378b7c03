/**
 * Tool-definition pinning (issue 31 §2) on two real gateway replicas sharing one real Redis,
 * with real SDK backends that change their tool `search` when a test flips their `revision`
 * (a description asking for a secret, a new argument): test/fixtures/mutable-tools-backend.ts.
 * v1 SDK clients (2025-11-25 sessions) alternate between the replicas; a v2 SDK client pinned
 * to 2026-07-28 reaches the 2026 backends.
 *
 * Each test stands alone (issue 41 §8): its own backends and its own users (pins are each
 * user's, `pinning.scope: user`), so it records its first sight, makes its change and checks
 * what each mode does, whatever ran before it. Approval by the command line (`switchboard pins
 * approve`, a process of its own) and by the admin route of a replica's metrics listener
 * reaches a live session on the other replica as `tools/list_changed`; a lockfile written by
 * `switchboard pins export` pins a third gateway.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { SEARCH_V1, SEARCH_V2, startMutableBackend, type MutableBackend } from '../fixtures/mutable-tools-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { eventually } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas } from '../helpers/replicas.js';
import { refused } from '../helpers/refused.js';
import { allTools, approveRoute, counted, pins, startPinningReplicas, type Listed, type PinningReplicas } from './pinning-rig.js';

const ADMIN_TOKEN = randomBytes(24).toString('base64url');

/** The backends, by name: `[revision, mode]`; each test has its own. */
const BACKENDS = {
  first: ['2025-11-25', 'log'],
  'first-docs': ['2026-07-28', 'block'],
  logged: ['2025-11-25', 'log'],
  held: ['2025-11-25', 'hold'],
  blocked: ['2025-11-25', 'block'],
  docs: ['2026-07-28', 'block'],
  listed: ['2025-11-25', 'block'],
  cli: ['2025-11-25', 'block'],
  'approved-held': ['2025-11-25', 'hold'],
  'approved-docs': ['2026-07-28', 'block'],
  locked: ['2025-11-25', 'log'],
} as const;
type Name = keyof typeof BACKENDS;

let idp: OAuthHandle;
let redis: RedisHandle;
const backends = {} as Record<Name, MutableBackend>;
let gw: PinningReplicas;
let dir: string;
const closers: Array<() => Promise<unknown>> = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sb-pinning-'));
  [idp, redis] = await Promise.all([startOAuthServer(), startRedis()]);
  await Promise.all(Object.entries(BACKENDS).map(async ([name, [revision]]) => (backends[name as Name] = await startMutableBackend(revision))));
  gw = await startPinningReplicas(dir, 'replica', {
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: Object.entries(BACKENDS).map(([name, [revision, mode]]) => ({ name, url: backends[name as Name].url, ...(revision === '2026-07-28' ? { protocol: revision } : {}), pinning: { mode } })),
    extra: { audit: { sink: 'file', path: join(dir, 'audit.jsonl'), flushInterval: 0 }, admin: { token: ADMIN_TOKEN } },
  });
});

after(async () => {
  for (const close of closers) await close().catch(() => {});
  await gw?.set.stop();
  await Promise.allSettled([...Object.values(backends).map((b) => b.close()), redis?.stop(), idp?.stop()]);
});

/** A v1 SDK client (2025-11-25 session) of user `sub` on `/mcp/{backend}` (`*`: `/mcp`): alternating between the replicas, or on one only. */
async function sessionClient(sub: string, backend: string, only?: number): Promise<Client> {
  const { set } = gw;
  const client = new Client({ name: 'pinning-test', version: '1.0.0' });
  const headers = { Authorization: `Bearer ${await idp.token({ sub, aud: set.audience })}` };
  const url = backend === '*' ? new URL(`${set.replicas[only ?? 0]!.url}/mcp`) : set.endpoint(only ?? 0, backend);
  const transport = new StreamableHTTPClientTransport(url, only === undefined ? { fetch: set.roundRobinFetch(), requestInit: { headers } } : { requestInit: { headers } });
  await withDeadline(client.connect(transport), 15_000, `connect to /mcp/${backend}`);
  closers.push(() => client.close());
  return client;
}

/** A v2 SDK client of user `sub` pinned to 2026-07-28 (no session), alternating between the replicas. */
async function statelessClient(sub: string, backend: string): Promise<V2Client> {
  const { set } = gw;
  const client = new V2Client({ name: 'pinning-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new V2Transport(set.endpoint(0, backend), { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${await idp.token({ sub, aud: set.audience })}` } } }));
  closers.push(() => client.close());
  return client;
}

const search = (listed: Listed) => listed.tools.find((t) => t.name === 'search');
const changesCounted = (backend: string, mode: string) => counted(gw.metricsUrls, `switchboard_tool_definition_changes_total{backend="${backend}",mode="${mode}"}`);

/**
 * A user lists `backend` (first sight of revision 1), the backend changes `search`, and the
 * user lists it again (the change is seen). `open` makes the user's client: a v1 backend builds
 * a session's tools when it opens, so the second list is a new session's; returns its client.
 */
async function changedFor<C extends Client | V2Client>(open: () => Promise<C>, backend: Name): Promise<C> {
  assert.equal(search(await (await open()).listTools())?.description, SEARCH_V1, `${backend} before its change`);
  backends[backend].revision = 2;
  const client = await open();
  await client.listTools();
  return client;
}

describe('tool-definition pinning on two replicas, both revisions', () => {
  test('first sight records each definition, served as the backend sends it; pins export writes them', async () => {
    assert.equal(search(await (await sessionClient('ann', 'first')).listTools())?.description, SEARCH_V1);
    assert.equal(search(await (await statelessClient('ann', 'first-docs')).listTools())?.description, SEARCH_V1);
    const lockfile = join(dir, 'first-pins.json');
    const exported = await pins(['export', '--config', gw.configFiles[0]!, '--out', lockfile]);
    assert.equal(exported.code, 0, exported.stderr);
    const file = JSON.parse(await readFile(lockfile, 'utf8')) as { schema: string; backends: Record<string, Record<string, { fingerprint: string; tool: { description: string } }>> };
    assert.equal(file.schema, 'switchboard.pins/v1');
    assert.deepEqual(Object.keys(file.backends).sort(), Object.keys(BACKENDS).sort(), 'every pinned backend');
    assert.equal(file.backends.first!.search!.tool.description, SEARCH_V1);
    assert.match(file.backends['first-docs']!.stable!.fingerprint, /^[0-9a-f]{64}$/);
    assert.equal(await changesCounted('first', 'log'), 0, 'nothing changed');
  });

  test('log: the new definition is served; the change is audited and counted once, whichever replica lists it again', async () => {
    const client = await changedFor(() => sessionClient('lou', 'logged'), 'logged');
    for (let i = 0; i < 3; i++) assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    await client.callTool({ name: 'search', arguments: { query: 'q', note: 'n' } });
    assert.deepEqual(backends.logged.calls.at(-1), { tool: 'search', args: { query: 'q', note: 'n' } });
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
    const client = await changedFor(() => sessionClient('hal', 'held'), 'held');
    const listed = search(await client.listTools());
    assert.equal(listed?.description, SEARCH_V1);
    assert.deepEqual(Object.keys(listed?.inputSchema?.properties ?? {}), ['query'], 'the new argument is not advertised');
    await client.callTool({ name: 'search', arguments: { query: 'q' } });
    assert.deepEqual(backends.held.calls.at(-1), { tool: 'search', args: { query: 'q' } });
    const before = backends.held.calls.length;
    await refused(client.callTool({ name: 'search', arguments: { query: 'q', note: 'secret' } }), -32602, /tool "search" of backend "held".*pinned inputSchema/);
    await refused(client.callTool({ name: 'search', arguments: {} }), -32602, /tool "search" of backend "held"/);
    assert.equal(backends.held.calls.length, before, 'refused calls never reached the backend');
    assert.equal(await changesCounted('held', 'hold'), 1);
  });

  test('block: the changed tool leaves the lists and its calls are refused naming backend and tool, on both revisions and through /mcp', async () => {
    const client = await changedFor(() => sessionClient('bea', 'blocked'), 'blocked');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['stable']);
    const before = backends.blocked.calls.length;
    await refused(client.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, /Tool "search" of backend "blocked" is blocked/);
    assert.equal(backends.blocked.calls.length, before);
    await client.callTool({ name: 'stable', arguments: {} });
    assert.equal(backends.blocked.calls.at(-1)?.tool, 'stable', 'unchanged tools keep working');

    const v2 = await changedFor(() => statelessClient('bea', 'docs'), 'docs');
    assert.deepEqual((await v2.listTools()).tools.map((t) => t.name), ['stable']);
    const docsBefore = backends.docs.calls.length;
    await refused(v2.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, /Tool "search" of backend "docs" is blocked/);
    assert.equal(backends.docs.calls.length, docsBefore);

    // The same through the aggregated /mcp, whose members are the pinned backends (bea's pins, seen on her own sessions).
    const aggregate = await sessionClient('bea', '*');
    const names = (await allTools(aggregate)).map((t) => t.name);
    assert.ok(names.includes('blocked__stable') && !names.includes('blocked__search') && !names.includes('docs__search'), names.join(', '));
    await refused(aggregate.callTool({ name: 'blocked__search', arguments: { query: 'q' } }), -32602, /Tool "search" of backend "blocked" is blocked/);
    assert.equal(backends.blocked.calls.length, before + 1, 'only the stable call reached the backend');
  });

  test('pins list shows the changes waiting for approval, one line per change and user', async () => {
    await changedFor(() => sessionClient('lis', 'listed'), 'listed');
    const listed = await pins(['list', '--config', gw.configFiles[1]!]);
    assert.equal(listed.code, 0, listed.stderr);
    const rows = listed.stdout.trim().split('\n').map((l) => l.split('\t')).filter((r) => r[0] === 'listed');
    assert.deepEqual(rows.map((r) => [r[1], r[2]!.slice(0, 7), r[3]!.slice(0, 5), /^user [A-Za-z0-9_-]{8}$/.test(r[5]!)]), [['search', 'pinned ', 'seen ', true]], listed.stdout);
  });

  test('approval by the command line: the new definition is the pin, and a live session on a replica hears tools/list_changed', async () => {
    await changedFor(() => sessionClient('cal', 'cli'), 'cli');
    const baseline = await streamsOpen(1);
    const client = await sessionClient('cal', 'cli', 1);
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    assert.equal(search(await client.listTools()), undefined);
    await waitForStream(1, baseline);
    const approved = await pins(['approve', '--config', gw.configFiles[0]!, '--backend', 'cli']);
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, /approved cli: search/);
    await eventually('tools/list_changed after approval', () => changed > 0);
    assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    await client.callTool({ name: 'search', arguments: { query: 'after', note: 'approved' } });
    assert.deepEqual(backends.cli.calls.at(-1), { tool: 'search', args: { query: 'after', note: 'approved' } });
    const again = await pins(['approve', '--config', gw.configFiles[0]!, '--backend', 'cli']);
    assert.match(again.stdout, /nothing waits for approval on cli/);
  });

  test('approval by the admin route: 401 without the token; the pin follows on every replica', async () => {
    const route = (body: unknown, token?: string) => approveRoute(gw.metricsUrls[0]!, body, token);
    assert.equal((await route({ backend: 'approved-held' })).status, 401);
    assert.equal((await route({ backend: 'approved-held' }, `${ADMIN_TOKEN}x`)).status, 401);
    assert.equal((await route({ backend: 'nope' }, ADMIN_TOKEN)).status, 404);
    assert.equal((await route({ tool: 'search' }, ADMIN_TOKEN)).status, 400);
    await changedFor(() => sessionClient('ada', 'approved-held'), 'approved-held');
    const baseline = await streamsOpen(1);
    const client = await sessionClient('ada', 'approved-held', 1);
    const aggregate = await sessionClient('ada', '*', 1);
    let changed = 0;
    let aggregateChanged = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    aggregate.setNotificationHandler(ToolListChangedNotificationSchema, () => void aggregateChanged++);
    assert.equal(search(await client.listTools())?.description, SEARCH_V1);
    assert.equal((await allTools(aggregate)).find((t) => t.name === 'approved-held__search')?.description, SEARCH_V1);
    await waitForStream(1, baseline + 1);
    const res = await route({ backend: 'approved-held', tool: 'search' }, ADMIN_TOKEN);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { backend: 'approved-held', approved: ['search'] });
    await eventually('tools/list_changed on replica 1 after approval on replica 0', () => changed > 0);
    await eventually('tools/list_changed on a /mcp session on replica 1', () => aggregateChanged > 0);
    assert.equal((await allTools(aggregate)).find((t) => t.name === 'approved-held__search')?.description, SEARCH_V2);
    assert.equal(search(await client.listTools())?.description, SEARCH_V2);
    await client.callTool({ name: 'search', arguments: { query: 'q', note: 'now allowed' } });
    assert.deepEqual(backends['approved-held'].calls.at(-1), { tool: 'search', args: { query: 'q', note: 'now allowed' } });

    const v2 = await changedFor(() => statelessClient('ada', 'approved-docs'), 'approved-docs');
    assert.deepEqual(await (await route({ backend: 'approved-docs' }, ADMIN_TOKEN)).json(), { backend: 'approved-docs', approved: ['search'] });
    assert.equal(search(await v2.listTools())?.description, SEARCH_V2);
    await v2.callTool({ name: 'search', arguments: { query: 'v2' } });
    assert.deepEqual(backends['approved-docs'].calls.at(-1), { tool: 'search', args: { query: 'v2' } });
  });

  test('lockfile: the file is the pins (read-only); a tool the file lacks counts as changed', async () => {
    assert.equal(search(await (await sessionClient('lee', 'locked')).listTools())?.description, SEARCH_V1);
    const lockfile = join(dir, 'locked-pins.json');
    assert.equal((await pins(['export', '--config', gw.configFiles[0]!, '--out', lockfile])).code, 0);
    backends.locked.revision = 2;
    const file = join(dir, 'locked.yaml');
    const lockedSet = await startReplicas({
      count: 1,
      redisUrl: redis.url,
      issuer: idp.issuer,
      backends: [
        // The file holds revision 1 of `locked`, which now serves revision 2.
        { name: 'locked', url: backends.locked.url, pinning: { mode: 'block', lockfile } },
        // No entry in the file at all: every tool is new to it.
        { name: 'unlisted', url: backends.locked.url, pinning: { mode: 'block', lockfile } },
      ],
      writeConfig: async (_index, config) => (await writeFile(file, stringify(config)), file),
    });
    try {
      const token = await idp.token({ sub: 'carol', aud: lockedSet.audience });
      const open = async (backend: string) => {
        const client = new Client({ name: 'lockfile-test', version: '1.0.0' });
        await client.connect(new StreamableHTTPClientTransport(lockedSet.endpoint(0, backend), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
        closers.push(() => client.close());
        return client;
      };
      const client = await open('locked');
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['stable']);
      await refused(client.callTool({ name: 'search', arguments: { query: 'q' } }), -32602, /backend "locked" is blocked/);
      assert.deepEqual((await (await open('unlisted')).listTools()).tools, []);
      const approve = await pins(['approve', '--config', file, '--backend', 'locked']);
      assert.notEqual(approve.code, 0);
      assert.match(approve.stderr, /lockfile/);
      const exported = await pins(['export', '--config', file]);
      const stored = JSON.parse(exported.stdout) as { backends: Record<string, object> };
      assert.deepEqual(stored.backends, { locked: {}, unlisted: {} }, 'first sight recorded nothing');
    } finally {
      await lockedSet.stop();
    }
  });
});

async function streamsOpen(index: number): Promise<number> {
  const text = await (await fetch(`${gw.metricsUrls[index]}/metrics`)).text();
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
