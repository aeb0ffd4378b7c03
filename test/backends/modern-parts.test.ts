/**
 * The parts of the 2026-07-28 adapter for 2025-11-25 clients (src/backends/modern/), each on its
 * own: the `initialize` result made from a DiscoverResult (and what its capabilities promise,
 * delivered on the client's GET stream), and the answers to the gateway's own
 * requests finding the round that waits for them, here or on another replica (the two
 * replicas' coordinators are joined directly: what crosses is exactly what `send` carries).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PromptListChangedNotificationSchema, ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { InputAnswers } from '../../src/backends/modern/input-answers.js';
import { converse, type Conversation } from '../../src/backends/modern/input-rounds.js';
import { SessionListens } from '../../src/backends/modern/session-listens.js';
import { initializeFromDiscover } from '../../src/backends/modern/initialize-from-discover.js';
import type { ReplicaMessage } from '../../src/state/coordinator.js';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const DISCOVER = {
  resultType: 'complete',
  supportedVersions: ['2026-07-28'],
  capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, logging: {}, experimental: { x: {} } },
  instructions: 'Be brief.',
  _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'modern-server', version: '3.1.0' } },
};

describe('initializeFromDiscover', () => {
  test('the client keeps its revision when served, else gets the latest; identity and instructions carried', () => {
    assert.equal(initializeFromDiscover(DISCOVER, '2025-06-18', 'b').protocolVersion, '2025-06-18');
    assert.equal(initializeFromDiscover(DISCOVER, '2031-01-01', 'b').protocolVersion, '2025-11-25');
    const result = initializeFromDiscover(DISCOVER, '2025-11-25', 'b');
    assert.deepEqual(result.serverInfo, { name: 'modern-server', version: '3.1.0' });
    assert.equal(result.instructions, 'Be brief.');
    assert.deepEqual(initializeFromDiscover({ capabilities: {} }, '2025-11-25', 'fallback').serverInfo, { name: 'fallback', version: '0.0.0' });
  });

  test('the capabilities are the backend\'s, as its DiscoverResult gives them', () => {
    assert.deepEqual(initializeFromDiscover(DISCOVER, '2025-11-25', 'b').capabilities, DISCOVER.capabilities);
  });
});

/**
 * What those capabilities promise a 2025 client, delivered (issue 28 §8): through a gateway on a
 * real Redis, the dual-era fixture serving 2026-07-28 only, and the official v1 SDK client,
 * whose standalone GET stream is the backend's `subscriptions/listen`.
 */
describe('the adapted session\'s GET stream', () => {
  let oauth: OAuthHandle;
  let redis: RedisHandle;
  let backend: ConformanceServer;
  let gateway: GatewayHandle;
  let client: Client;
  const heard: string[] = [];

  before(async () => {
    [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startConformanceServer({ eras: '2026' })]);
    gateway = await startGateway({ issuer: oauth.issuer, redisUrl: redis.url, backends: [{ name: 'modern', url: backend.url }] });
    client = new Client({ name: 'get-stream-client', version: '1.0.0' }, { capabilities: {} });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void heard.push('tools/list_changed'));
    client.setNotificationHandler(PromptListChangedNotificationSchema, () => void heard.push('prompts/list_changed'));
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void heard.push(`resources/updated ${n.params.uri}`));
    const token = await oauth.token({ sub: 'get-stream-user', aud: gateway.audience });
    await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('modern'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await gateway?.close();
    await Promise.allSettled([backend?.stop(), redis?.stop(), oauth?.stop()]);
  });

  /** Calls `tool`, then waits (bounded) until `notification` has been heard on the GET stream. */
  async function triggerAndHear(tool: string, notification: string): Promise<void> {
    await client.callTool({ name: tool, arguments: {} });
    for (let i = 0; i < 50 && !heard.includes(notification); i++) await new Promise((resolve) => setTimeout(resolve, 100));
  }

  test('the capabilities are the backend\'s: list changes and subscriptions reach the client on its GET stream', async () => {
    const capabilities = client.getServerCapabilities();
    assert.equal(capabilities?.tools?.listChanged, true, JSON.stringify(capabilities));
    assert.equal(capabilities?.prompts?.listChanged, true, JSON.stringify(capabilities));
    assert.equal(capabilities?.resources?.subscribe, true, JSON.stringify(capabilities));
    await triggerAndHear('test_trigger_tool_change', 'tools/list_changed');
    await triggerAndHear('test_trigger_prompt_change', 'prompts/list_changed');
    await client.subscribeResource({ uri: 'test://watched-resource' });
    await triggerAndHear('switchboard_trigger_watched_update', 'resources/updated test://watched-resource');
    assert.deepEqual(heard, ['tools/list_changed', 'prompts/list_changed', 'resources/updated test://watched-resource']);
  });
});

/** The backend's listen answered as JSON (issue 29): a JSON-lines stream, or one response. */
describe('SessionListens, a listen answered as JSON', () => {
  const TAG = 'io.modelcontextprotocol/subscriptionId';
  const line = (method: string, params: Record<string, unknown> = {}) => `${JSON.stringify({ jsonrpc: '2.0', method, params: { ...params, _meta: { [TAG]: 'l1' } } })}\n`;
  const json = (body: string | AsyncIterable<string>): BackendResponse => ({ status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(body) });

  test('one JSON response (the backend refusing the listen) opens no stream', async () => {
    const refusal = json('{"jsonrpc":"2.0","id":"listen:1","error":{"code":-32601,"message":"Method not found"}}');
    assert.equal(await new SessionListens().open('u', 's', async () => refusal), undefined);
  });

  test('JSON lines: each notification an SSE event without the acknowledgement and the tag, on one stream across the listen opened again', async () => {
    async function* openFirst(): AsyncGenerator<string> {
      yield line('notifications/subscriptions/acknowledged');
      yield line('notifications/tools/list_changed');
      await new Promise(() => {}); // left open, as the reference server leaves it
    }
    let opened = 0;
    const listens = new SessionListens();
    const stream = await listens.open('u', 's', async () => (++opened === 1 ? json(openFirst()) : json(line('notifications/subscriptions/acknowledged') + line('notifications/resources/updated', { uri: 'test://w' }))));
    assert.ok(stream);
    const chunks = stream.body[Symbol.asyncIterator]();
    const first = await chunks.next();
    assert.equal(String(first.value), 'data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{}}}\n\n');
    listens.changed('u', 's');
    let rest = '';
    for (let chunk = await chunks.next(); !chunk.done; chunk = await chunks.next()) rest += String(chunk.value);
    assert.equal(rest, 'data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://w","_meta":{}}}\n\n');
    assert.equal(opened, 2);
  });
});

/** Two replicas whose coordinators deliver to each other. */
function twoReplicas(): [InputAnswers, InputAnswers, ReplicaMessage[]] {
  const crossed: ReplicaMessage[] = [];
  const replicas: Record<string, InputAnswers> = {};
  const coordinator = (replicaId: string) => ({
    replicaId,
    send: async (to: string, message: ReplicaMessage) => {
      crossed.push(message);
      if (message.type === 'input-answer') replicas[to]!.receive(JSON.parse(message.message) as Record<string, unknown>, message);
    },
  });
  replicas.a = new InputAnswers(coordinator('a'));
  replicas.b = new InputAnswers(coordinator('b'));
  return [replicas.a, replicas.b, crossed];
}

const ALICE = { sessionId: 'sb26-alice.one', userKey: 'alice' };

describe('input rounds', () => {
  test('an answer past the message bound (16 MiB) fails the call with an error about the answer, not about input', async () => {
    async function* huge(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"');
      for (let i = 0; i < 17 * 16; i++) yield Buffer.alloc(64 * 1024, 0x78);
      yield Buffer.from('"}}\n');
    }
    const first: BackendResponse = { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(huge()) };
    // The first answer fails before any input is asked: nothing of the conversation's input side is reached.
    const conversation = { request: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'x' } }, headers: {} } as unknown as Conversation;
    const text = await converse(conversation, { res: first }).body.text();
    const [event] = text.split('\n').filter((line) => line.startsWith('data: '));
    const error = (JSON.parse(event!.slice('data: '.length)) as { id: number; error: { message: string } });
    assert.equal(error.id, 7);
    assert.match(error.error.message, /^The backend's answer could not be relayed: .*16777216/);
  });
});

describe('InputAnswers', () => {
  test('the answers to one round, each landing on either replica, resolve it by key once all are in', async () => {
    const [a, b, crossed] = twoReplicas();
    const round = a.open(['user_name', 'client_roots'], ALICE);
    const [nameId, rootsId] = [round.ids.get('user_name')!, round.ids.get('client_roots')!];
    assert.ok(InputAnswers.isOurs(nameId) && InputAnswers.isOurs(rootsId));
    assert.equal(InputAnswers.isOurs(7), false);
    await a.deliver({ jsonrpc: '2.0', id: nameId, result: { action: 'accept', content: { name: 'Ada' } } }, ALICE);
    await b.deliver({ jsonrpc: '2.0', id: rootsId, result: { roots: [] } }, ALICE);
    assert.deepEqual(await round.answers, { user_name: { action: 'accept', content: { name: 'Ada' } }, client_roots: { roots: [] } });
    assert.equal(crossed.length, 1, 'only the answer that landed on the other replica crossed');
  });

  test('an error answer fails the round; a late answer after it closed is dropped', async () => {
    const [a] = twoReplicas();
    const round = a.open(['ask'], ALICE);
    await a.deliver({ jsonrpc: '2.0', id: round.ids.get('ask'), error: { code: -32601, message: 'not supported' } }, ALICE);
    await assert.rejects(round.answers, /the client refused the request: not supported/);
    a.receive({ jsonrpc: '2.0', id: round.ids.get('ask'), result: {} }, ALICE);
  });

  test('a round nobody answers times out; closing one ends its wait', async () => {
    const [a] = twoReplicas();
    // The round's timer does not hold a process open (a gateway's server does); this test's does.
    const alive = setTimeout(() => {}, 1_000);
    await assert.rejects(a.open(['ask'], ALICE, 20).answers, /did not answer in time/);
    clearTimeout(alive);
    const closed = a.open(['ask'], ALICE);
    closed.close();
    await assert.rejects(closed.answers, /the call ended/);
  });
});
