/**
 * A pin approval reaches 2026-07-28 clients (issue 31 "Left"; streams/open-listens.ts): they
 * have no session and no GET stream, only an open `subscriptions/listen`. Two real gateway
 * replicas on one real Redis; real SDK backends whose tool `search` changes between sessions
 * (test/fixtures/mutable-tools-backend.ts): `legacy` speaks 2025-11-25 (its listens go through
 * the gateway's bridge, stateless/legacy-listen.ts), `modern` speaks 2026-07-28 (its listens
 * are the backend's own, relayed by stateless/answer-relay.ts). Listens are held on replica 1,
 * the approval is made through replica 0's admin route.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { SEARCH_V2, startMutableBackend, type MutableBackend } from '../fixtures/mutable-tools-backend.js';
import { freePort } from '../helpers/free-port.js';
import { eventually } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

const ADMIN_TOKEN = randomBytes(24).toString('base64url');
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

let idp: OAuthHandle;
let redis: RedisHandle;
let legacy: MutableBackend;
let modern: MutableBackend;
let set: ReplicaSet;
let metricsUrl: string;
const closers: Array<() => Promise<unknown>> = [];

before(async () => {
  [idp, redis, legacy, modern] = await Promise.all([startOAuthServer(), startRedis(), startMutableBackend('2025-11-25'), startMutableBackend('2026-07-28')]);
  const metricsPorts = await Promise.all([freePort(), freePort()]);
  metricsUrl = `http://127.0.0.1:${metricsPorts[0]}`;
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [
      { name: 'legacy', url: legacy.url, protocol: '2025-11-25', pinning: { mode: 'hold' } },
      { name: 'modern', url: modern.url, protocol: '2026-07-28', pinning: { mode: 'hold' } },
    ],
    // Tool search on /mcp (threshold 1: its four tools are searched, not listed).
    extra: { admin: { token: ADMIN_TOKEN }, discovery: { threshold: 1 } },
    // The admin route is served on the metrics listener; the test approves through replica 0's.
    writeConfig: async (index, config) => {
      const file = join(await mkdtemp(join(tmpdir(), 'sb-pin-listens-')), `replica-${index}.yaml`);
      await writeFile(file, stringify({ ...config, metrics: { listen: { host: '127.0.0.1', port: metricsPorts[index] } } }));
      return file;
    },
  });
});

after(async () => {
  for (const close of closers) await close().catch(() => {});
  await set?.stop();
  await Promise.allSettled([legacy?.close(), modern?.close(), redis?.stop(), idp?.stop()]);
});

const url = (replica: number, endpoint?: string) => (endpoint ? set.endpoint(replica, endpoint) : new URL(`${set.replicas[replica]!.url}/mcp`));
const tokenOf = (sub: string) => idp.token({ sub, aud: set.audience });

/** A v2 SDK client pinned to 2026-07-28, on one replica only. */
async function v2Client(replica: number, endpoint: string | undefined, sub: string): Promise<Client> {
  const client = new Client({ name: 'pin-listens', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StreamableHTTPClientTransport(url(replica, endpoint), { requestInit: { headers: { Authorization: `Bearer ${await tokenOf(sub)}` } } }));
  closers.push(() => client.close());
  return client;
}

/** A raw `subscriptions/listen` on replica 1: the stream after its acknowledgement (checked to honour `expected`). */
async function rawListen(endpoint: string | undefined, sub: string, id: string, notifications: Record<string, boolean>, expected: Record<string, boolean>): Promise<SseReader> {
  const res = await fetch(url(1, endpoint), {
    method: 'POST',
    headers: statelessHeaders(await tokenOf(sub), 'subscriptions/listen'),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: META } }),
  });
  assert.equal(res.headers.get('content-type'), 'text/event-stream', `${res.status} ${res.headers.get('content-type')}`);
  const events = new SseReader(res);
  closers.push(() => events.cancel());
  const ack = messageOf((await events.next(10_000))!);
  assert.equal(ack?.method, 'notifications/subscriptions/acknowledged');
  assert.deepEqual((ack?.params as { notifications: unknown }).notifications, expected);
  return events;
}

/** Approves the backend's waiting change through replica 0's admin route. */
async function approved(backend: string): Promise<void> {
  const res = await fetch(`${metricsUrl}/admin/pins/approve`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` }, body: JSON.stringify({ backend }) });
  assert.deepEqual(await res.json(), { backend, approved: ['search'] });
}

/** The listen's next message is `tools/list_changed` tagged with `subscriptionId`. */
async function heardTagged(events: SseReader, subscriptionId: string): Promise<void> {
  const heard = messageOf((await events.next(10_000))!);
  assert.equal(heard?.method, 'notifications/tools/list_changed');
  assert.equal((heard?.params as { _meta: Record<string, unknown> })._meta[SUBSCRIPTION_ID], subscriptionId);
}

const search = async (client: Client) => (await client.listTools()).tools.find((t) => t.name === 'search');

describe('a pin approval reaches 2026-07-28 listens on the other replica', () => {
  test('the backends change search; the change waits for approval', async () => {
    // One user throughout: pins are each user's own (pinning.scope user), and it is this user's change that waits.
    for (const backend of ['legacy', 'modern']) assert.ok(await search(await v2Client(0, backend, 'listener')), backend);
    legacy.revision = 2;
    modern.revision = 2;
    for (const backend of ['legacy', 'modern']) assert.notEqual((await search(await v2Client(0, backend, 'listener')))?.description, SEARCH_V2, `${backend} holds the pinned definition`);
  });

  test('a 2025 backend through the bridge: the v2 client\'s listen hears tools/list_changed, /mcp\'s too; a listen without toolsListChanged, and another endpoint\'s, hear nothing', async () => {
    const client = await v2Client(1, 'legacy', 'listener');
    let changed = 0;
    client.setNotificationHandler('notifications/tools/list_changed', () => void changed++);
    const subscription = await client.listen({ toolsListChanged: true });
    assert.deepEqual(subscription.honoredFilter, { toolsListChanged: true });
    const aggregate = await rawListen(undefined, 'listener', 'agg-1', { toolsListChanged: true }, { toolsListChanged: true });
    const promptsOnly = await rawListen('legacy', 'listener', 'prompts-1', { promptsListChanged: true }, {});
    const otherEndpoint = await rawListen('modern', 'listener', 'modern-1', { toolsListChanged: true }, { toolsListChanged: true });
    // A 2026 client's tool search on /mcp, kept on replica 1: the pinned definition before the approval.
    const searcher = await v2Client(1, undefined, 'listener');
    const found = async () => JSON.stringify((await searcher.callTool({ name: 'search_tools', arguments: { query: 'search the catalog' } })).structuredContent);
    assert.match(await found(), /legacy__search/);
    assert.doesNotMatch(await found(), /id_rsa/);

    await approved('legacy');
    await heardTagged(aggregate, 'agg-1');
    await eventually('the v2 client to hear tools/list_changed', () => changed > 0);
    assert.equal(changed, 1);
    assert.equal((await search(client))?.description, SEARCH_V2);
    assert.match(await found(), /id_rsa/, 'the kept search list is read again at once, not after 60 s');
    // Written on replica 1 in the same turn as the two above: anything for these would be there by now.
    await assert.rejects(promptsOnly.next(500), /no SSE event within 500 ms/);
    await assert.rejects(otherEndpoint.next(500), /no SSE event within 500 ms/);
    await subscription.close();
  });

  test('a 2026 backend: the relayed listen gets the notice between the backend\'s events, tagged with the backend\'s subscription id', async () => {
    const events = await rawListen('modern', 'listener-2', 'modern-2', { toolsListChanged: true }, { toolsListChanged: true });
    await approved('modern');
    await heardTagged(events, 'modern-2');
    assert.equal((await search(await v2Client(1, 'modern', 'listener-2')))?.description, SEARCH_V2);
  });
});
