/**
 * Many replicas, one Redis (issue 4, SPEC §5): three real gateway processes behind a
 * round-robin "load balancer" with no session affinity. Server→client requests answered
 * through another replica, a replica killed with SIGKILL mid-conversation, SSE streams
 * resumed on another replica with Last-Event-ID (the first one alive, then dead), and
 * SIGTERM draining an in-flight call. The same suite runs on a Redis Cluster
 * (replicas-cluster.test.ts; SWITCHBOARD_TEST_REDIS_TOPOLOGY, test/helpers/redis-topology.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startTestRedis, type TestRedis } from '../helpers/redis-topology.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';
import { allToolNames } from '../helpers/pages.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { messageOf, SseReader, type SseEvent } from '../helpers/sse-client.js';

let redis: TestRedis;
let oauth: OAuthHandle;
let everything: EverythingHandle;
/** Resumes streams correctly (server-everything's event store does not: see the fixture). */
let resumable: { url: string; stop(): Promise<void> };
let set: ReplicaSet;

before(async () => {
  [redis, oauth, everything, resumable] = await Promise.all([startTestRedis(undefined, { persistent: true }), startOAuthServer(), startEverything(), startResumableBackend()]);
  set = await startReplicas({
    count: 3,
    redis: redis.config,
    issuer: oauth.issuer,
    backends: [
      { name: 'everything', url: everything.url },
      { name: 'resumable', url: resumable.url },
    ],
  });
});

after(async () => {
  if (process.env.SB_DEBUG_REPLICAS) for (const r of set?.replicas ?? []) process.stderr.write(`--- replica ${r.index}\n${r.child.logs()}\n`);
  await set?.stop();
  await Promise.allSettled([everything?.stop(), resumable?.stop(), oauth?.stop(), redis?.stop()]);
});

const textOf = (result: unknown) => JSON.stringify((result as { content?: unknown }).content ?? result);

async function within<T>(what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

async function eventually(what: string, check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Which replica relays open SSE streams right now (from its own metrics). */
async function replicasWithOpenStreams(): Promise<number[]> {
  const found: number[] = [];
  for (const r of set.replicas) {
    const text = await fetch(`${r.url}/metrics`).then((res) => res.text(), () => '');
    const value = Number(/^switchboard_sse_streams_open (\d+)/m.exec(text)?.[1] ?? 0);
    if (value > 0) found.push(r.index);
  }
  return found;
}

describe('an SDK client whose requests alternate between replicas', () => {
  let client: Client;
  const updates: string[] = [];
  let sampled = 0;

  before(async () => {
    const token = await oauth.token({ sub: 'roaming-user', aud: set.audience });
    client = new Client({ name: 'roaming', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      sampled++;
      return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'forty-two' } };
    });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { color: 'green', number: 7, pets: 'cats' } }));
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///srv/replicated', name: 'Replicated Root' }] }));
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}/mcp/everything`), {
      fetch: set.roundRobinFetch(),
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    await within('connect', client.connect(transport), 20_000);
  });

  after(async () => {
    await client?.close().catch(() => {});
  });

  test('sampling, elicitation and roots: answers posted to another replica reach the backend request', async () => {
    const sampling = await within('sampling', client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'six times seven?', maxTokens: 20 } }), 20_000);
    assert.match(textOf(sampling), /forty-two/);
    assert.equal(sampled, 1);
    const elicitation = await within('elicitation', client.callTool({ name: 'trigger-elicitation-request', arguments: {} }), 20_000);
    assert.match(textOf(elicitation), /green/);
    const roots = await within('roots', client.callTool({ name: 'get-roots-list', arguments: {} }), 20_000);
    assert.match(textOf(roots), /Replicated Root/);
  });

  test('progress notifications arrive in order', async () => {
    const progress: number[] = [];
    await within('long operation', client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } }, undefined, { onprogress: (p) => progress.push(p.progress) }), 20_000);
    assert.deepEqual(progress, [1, 2, 3, 4]);
  });
});

describe('the aggregated endpoint /mcp with requests alternating between replicas', () => {
  test('pages, server→client requests and notifications of both backends work across replicas', async () => {
    const token = await oauth.token({ sub: 'roaming-aggregate', aud: set.audience });
    let sampled = 0;
    const updates: string[] = [];
    const client = new Client({ name: 'roaming-aggregate', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      sampled++;
      return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'forty-two' } };
    });
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updates.push(n.params.uri));
    const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}/mcp`), {
      fetch: set.roundRobinFetch(),
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    await within('connect', client.connect(transport), 20_000);
    try {
      // Each page may come from another replica: the cursor carries everything needed.
      const names = (await allToolNames(client)).items;
      assert.ok(names.includes('everything__echo') && names.includes('resumable__tick'), names.join(', '));
      assert.equal(new Set(names).size, names.length);
      const sampling = await within('sampling', client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'six times seven?', maxTokens: 20 } }), 20_000);
      assert.match(textOf(sampling), /forty-two/);
      assert.equal(sampled, 1);
      await client.callTool({ name: 'resumable__tick', arguments: { uri: 'test://ticker', count: 3, intervalMs: 100 } });
      await eventually('resources/updated from the second backend', () => updates.filter((u) => u === 'resumable+test://ticker').length >= 3, 15_000);
    } finally {
      await client.close().catch(() => {});
    }
  });
});

describe('the replica holding a session\'s GET stream is killed with SIGKILL', () => {
  test('resource updates keep arriving through another replica, and calls go on', async () => {
    const token = await oauth.token({ sub: 'survivor', aud: set.audience });
    const updates: string[] = [];
    const client = new Client({ name: 'survivor', version: '1.0.0' });
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}/mcp/resumable`), {
      fetch: set.roundRobinFetch(),
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    await within('connect', client.connect(transport), 20_000);
    let killed: number | undefined;
    try {
      await client.callTool({ name: 'tick', arguments: { uri: 'test://ticker', count: 200, intervalMs: 200 } });
      await eventually('a first resource update', () => updates.length > 0, 10_000);
      const holders = await replicasWithOpenStreams();
      assert.equal(holders.length, 1, `exactly one replica relays the session's GET stream (${holders})`);
      killed = holders[0]!;
      const exit = await set.kill(killed, 'SIGKILL');
      assert.equal(exit.signal, 'SIGKILL');
      const before = updates.length;
      // The SDK reconnects its GET stream with Last-Event-ID through the balancer; another
      // replica takes the stream over and resumes the backend's stream where it stood.
      await eventually('resource updates after the kill', () => updates.length > before + 3, 30_000);
      const counted = await within('a call after the kill', client.callTool({ name: 'count', arguments: { steps: 2, intervalMs: 10 } }), 10_000);
      assert.match(textOf(counted), /counted 2/);
    } finally {
      await client.close().catch(() => {});
      if (killed !== undefined) await set.restart(killed);
    }
  });
});

// ---------------------------------------------------------------- raw SSE ---

interface RawSession {
  token: string;
  sessionId: string;
}

function headers(s: RawSession, extra: Record<string, string> = {}): Record<string, string> {
  return { authorization: `Bearer ${s.token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': s.sessionId, 'mcp-protocol-version': '2025-11-25', ...extra };
}

async function rawSession(replica: number, sub: string): Promise<RawSession> {
  const token = await oauth.token({ sub, aud: set.audience });
  const res = await fetch(set.endpoint(replica, 'resumable'), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  assert.equal(res.status, 200);
  await res.text();
  const session = { token, sessionId: res.headers.get('mcp-session-id')! };
  const initialized = await fetch(set.endpoint((replica + 1) % 3, 'resumable'), { method: 'POST', headers: headers(session), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  assert.equal(initialized.status, 202);
  return session;
}

/** Starts a long operation on `replica`, reads `count` progress events, and drops the connection. */
async function startAndDrop(replica: number, session: RawSession, steps: number, count: number): Promise<{ seen: SseEvent[]; lastId: string }> {
  const controller = new AbortController();
  const res = await fetch(set.endpoint(replica, 'resumable'), {
    method: 'POST',
    headers: headers(session),
    signal: controller.signal,
    body: countCall(steps),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const reader = new SseReader(res);
  const seen = await reader.until((e) => (e.data ? seenProgress([e]).length : 0) > 0 && --count === 0, 15_000);
  controller.abort();
  const lastId = [...seen].reverse().find((e) => e.id)!.id!;
  return { seen, lastId };
}

const countCall = (steps: number) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'count', arguments: { steps, intervalMs: 400 }, _meta: { progressToken: 'p7' } } });

function seenProgress(events: SseEvent[]): number[] {
  return events.map(messageOf).filter((m) => m?.method === 'notifications/progress').map((m) => (m!.params as { progress: number }).progress);
}

async function resumeOn(replica: number, session: RawSession, lastId: string, timeoutMs: number): Promise<SseEvent[]> {
  const res = await fetch(set.endpoint(replica, 'resumable'), { headers: headers(session, { accept: 'text/event-stream', 'last-event-id': lastId }) });
  assert.equal(res.status, 200);
  return new SseReader(res).until((e) => messageOf(e)?.id === 7, timeoutMs);
}

function assertComplete(first: SseEvent[], rest: SseEvent[], steps: number): void {
  const progress = [...seenProgress(first), ...seenProgress(rest)];
  assert.deepEqual(progress, Array.from({ length: steps }, (_, i) => i + 1), 'every progress event exactly once, in order');
  const result = messageOf(rest.at(-1)!);
  assert.equal(result?.id, 7);
  assert.match(JSON.stringify(result?.result), new RegExp(`counted ${steps}`));
  const ids = [...first, ...rest].filter((e) => e.data).map((e) => Number(e.id!.split('-')[1]));
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b), 'event ids increase');
  assert.equal(new Set(ids).size, ids.length, 'no event twice');
}

describe('resuming an SSE stream on another replica with Last-Event-ID', () => {
  test('while the first replica still reads the backend: followed over Redis, nothing missed', async () => {
    const session = await rawSession(0, 'resumer-a');
    const { seen, lastId } = await startAndDrop(0, session, 6, 2);
    const rest = await resumeOn(1, session, lastId, 20_000);
    assertComplete(seen, rest, 6);
  });

  test('after the first replica died (SIGKILL): taken over from the log and the backend', async () => {
    const session = await rawSession(1, 'resumer-b');
    const { seen, lastId } = await startAndDrop(1, session, 8, 2);
    await set.kill(1, 'SIGKILL');
    try {
      const rest = await resumeOn(2, session, lastId, 40_000);
      assertComplete(seen, rest, 8);
    } finally {
      await set.restart(1);
    }
  });
});

describe('SIGTERM', () => {
  test('drains: the client stream gets retry and closes, the call finishes, the process exits 0', async () => {
    const session = await rawSession(2, 'drained-user');
    const res = await fetch(set.endpoint(2, 'resumable'), { method: 'POST', headers: headers(session), body: countCall(6) });
    const reader = new SseReader(res);
    const first = await reader.until((e) => seenProgress([e]).length > 0, 10_000);
    const exited = set.kill(2, 'SIGTERM');
    const tail = await reader.until(() => false, 10_000);
    assert.ok(tail.some((e) => e.retry !== undefined), 'the stream told the client when to reconnect');
    const lastId = [...first, ...tail].reverse().find((e) => e.id)!.id!;
    // The client reconnects through the balancer; replica 2 is draining, so another one answers.
    const rest = await resumeOn(0, session, lastId, 20_000);
    assertComplete([...first, ...tail], rest, 6);
    const exit = await exited;
    assert.equal(exit.code, 0, 'graceful exit');
    await set.restart(2);
  });
});
