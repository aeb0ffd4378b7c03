/**
 * A 2025-11-25 client of a 2026-07-28-only backend (issue 15, "Bridging: 2025-11-25 client →
 * 2026 backend"; src/backends/modern/): the official v1 SDK client, its requests alternating
 * between two real gateway replicas on one real Redis, against the dual-era conformance
 * fixture serving 2026-07-28 only (a v2 SDK server that answers `initialize` with -32022 and
 * asks its client for input with `input_required` results). The gateway answers `initialize`
 * from the backend's `server/discover`, keeps the session and its log level, and turns each
 * `input_required` into real requests on the client's stream, wherever the client's answers land.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { confirmOnPage, launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

let oauth: OAuthHandle;
let redis: RedisHandle;
let backend: ConformanceServer;
let set: ReplicaSet;
let client: Client;
let browser: BrowserHandle;
const asked: string[] = [];
const logged: string[] = [];
let toolChanges = 0;

const textOf = (result: unknown) => ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text).join(' ');

before(async () => {
  [oauth, redis, backend, browser] = await Promise.all([startOAuthServer(), startRedis(), startConformanceServer({ eras: '2026' }), launchBrowser()]);
  set = await startReplicas({ count: 2, redisUrl: redis.url, issuer: oauth.issuer, backends: [{ name: 'modern', url: backend.url }] });
  const token = await oauth.token({ sub: 'session-era-user', aud: set.audience });
  client = new Client({ name: 'session-era-client', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message);
    // URL mode: the user opens the backend's page in a real browser and confirms there; the client only says it was opened.
    if (request.params.mode === 'url') {
      await confirmOnPage(browser, request.params.url);
      return { action: 'accept' };
    }
    const message = request.params.message;
    if (message.includes('name')) return { action: 'accept', content: { name: 'Alice' } };
    if (message.includes('color')) return { action: 'accept', content: { color: 'teal' } };
    return { action: 'accept', content: { value: 'yes' } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    asked.push('sampling');
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'Bonjour' } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    asked.push('roots');
    return { roots: [{ uri: 'file:///work', name: 'Work' }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logged.push(String(n.params.data)));
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void toolChanges++);
  const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}/mcp/modern`), {
    fetch: set.roundRobinFetch(),
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
});

after(async () => {
  await client?.close().catch(() => {});
  await set?.stop();
  await Promise.allSettled([backend?.stop(), redis?.stop(), oauth?.stop(), browser?.close()]);
});

describe('a 2025-11-25 SDK client of a 2026-07-28-only backend, across two replicas', () => {
  test('the session the gateway keeps for the client is stored under the user, as all per-user state', async () => {
    const store = new Redis(redis.url);
    try {
      const keys = await store.keys('*adapted-session:*');
      assert.equal(keys.length, 1, keys.join(', '));
      assert.ok(keys[0]!.includes(`${userKeyOf(oauth.issuer, 'session-era-user')}:adapted-session:`), keys[0]);
    } finally {
      store.disconnect();
    }
  });

  test('initialize is answered from server/discover: the backend named, 2025-11-25 negotiated, its tools listed and called', async () => {
    assert.equal(client.getServerVersion()?.name, 'switchboard-conformance-fixture');
    assert.ok(client.getServerCapabilities()?.tools, JSON.stringify(client.getServerCapabilities()));
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'test_input_required_result_elicitation'));
    assert.equal(textOf(await client.callTool({ name: 'test_simple_text', arguments: {} })), 'This is a simple text response for testing.');
    assert.deepEqual(await client.ping(), {});
  });

  test('input_required becomes real requests on the client stream, answered on either replica, over several rounds', async () => {
    asked.length = 0;
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} })), 'Hello, Alice!');
    assert.deepEqual(asked, ['What is your name?']);
    asked.length = 0;
    assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} })), 'Multi-round complete for Alice who likes teal');
    assert.deepEqual(asked, ['Step 1: What is your name?', 'Step 2: What is your favorite color?']);
    asked.length = 0;
    const all = textOf(await client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} }));
    assert.equal(all, 'Name: Alice; Greeting: Bonjour; Roots: 1');
    assert.deepEqual([...asked].sort(), ['What is your name?', 'roots', 'sampling']);
  });

  test('URL-mode elicitation: the backend\'s page reaches the client as a url request, the user confirms it in a real browser, the call completes', async () => {
    asked.length = 0;
    assert.equal(textOf(await client.callTool({ name: 'switchboard_url_confirmation', arguments: {} })), 'Confirmed on the page');
    assert.deepEqual(asked, ['Confirm on the page']);
  });

  test('the log level is kept by the gateway and sent as _meta: no logs before setLevel, every one after', async () => {
    logged.length = 0;
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    assert.deepEqual(logged, []);
    await client.setLoggingLevel('info');
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    assert.deepEqual(logged, ['Tool execution started', 'Tool processing data', 'Tool execution completed']);
  });

  test('the GET stream is the backend\'s subscriptions/listen: a tool list change reaches the client; subscriptions are kept', async () => {
    assert.deepEqual(await client.subscribeResource({ uri: 'test://static-text' }), {});
    const before = toolChanges;
    await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    for (let i = 0; i < 50 && toolChanges === before; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(toolChanges, before + 1);
    assert.deepEqual(await client.unsubscribeResource({ uri: 'test://static-text' }), {});
  });
});

describe('a 2026-07-28-only backend as a member of /mcp, for a 2025-11-25 SDK client', () => {
  test('its tools are listed namespaced and called, its input_required reaches the client as a request', async () => {
    const token = await oauth.token({ sub: 'aggregate-user', aud: set.audience });
    const aggregate = new Client({ name: 'aggregate-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    aggregate.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Mae' } }));
    await aggregate.connect(
      new StreamableHTTPClientTransport(new URL(`${set.replicas[1]!.url}/mcp`), { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
    );
    try {
      const { tools } = await aggregate.listTools();
      assert.ok(tools.some((t) => t.name === 'modern__test_simple_text'), tools.map((t) => t.name).join(', '));
      assert.equal(textOf(await aggregate.callTool({ name: 'modern__test_simple_text', arguments: {} })), 'This is a simple text response for testing.');
      assert.equal(textOf(await aggregate.callTool({ name: 'modern__test_input_required_result_elicitation', arguments: {} })), 'Hello, Mae!');
    } finally {
      await aggregate.close().catch(() => {});
    }
  });
});
