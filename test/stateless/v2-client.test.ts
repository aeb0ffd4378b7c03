/**
 * The official v2 SDK client (`@modelcontextprotocol/client` 2.4.0, pinned to MCP 2026-07-28),
 * its requests alternating between two real gateway replicas on one real Redis (issue 15, "Done
 * when": a 2026-only backend built with `@modelcontextprotocol/server` works through
 * `/mcp/{backend}` and `/mcp` for a 2026 client, including sampling, elicitation and
 * subscriptions, on two replicas). Backends: the dual-era conformance fixture serving 2026-07-28
 * only (a v2 SDK server), and the same fixture serving 2025-11-25 only (a v1 SDK server that
 * asks during its calls), reached through the gateway's bridge.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { confirmOnPage, launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

let oauth: OAuthHandle;
let redis: RedisHandle;
let modern: ConformanceServer;
let legacy: ConformanceServer;
let set: ReplicaSet;
let browser: BrowserHandle;
const clients: Client[] = [];

before(async () => {
  [oauth, redis, modern, legacy, browser] = await Promise.all([
    startOAuthServer(),
    startRedis(),
    startConformanceServer({ eras: '2026' }),
    startConformanceServer({ eras: '2025' }),
    launchBrowser(),
  ]);
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [
      { name: 'modern', url: modern.url },
      { name: 'legacy', url: legacy.url },
    ],
    // The replicas open each other's requestState (the bridge's parked calls).
    extra: { secrets: { tokenKey: randomBytes(32).toString('base64url') } },
  });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await set?.stop();
  await Promise.allSettled([modern?.stop(), legacy?.stop(), redis?.stop(), oauth?.stop(), browser?.close()]);
});

const textOf = (result: unknown) => ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text).join(' ');

/** A v2 client of `path` (`/mcp/modern`, `/mcp`…), answering elicitation, sampling and roots, its requests spread over both replicas. */
async function connect(path: string, asked: string[]): Promise<Client> {
  const token = await oauth.token({ sub: `v2-${path}`, aud: set.audience });
  const client = new Client(
    { name: 'v2-client', version: '1.0.0' },
    { capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  client.setRequestHandler('elicitation/create', async (request) => {
    asked.push(request.params.message);
    // URL mode: the user opens the backend's page in a real browser and confirms there; the client only says it was opened.
    if (request.params.mode === 'url') {
      await confirmOnPage(browser, request.params.url);
      return { action: 'accept' };
    }
    const content: Record<string, string> = request.params.message.includes('color') ? { color: 'amber' } : { name: 'Alice' };
    return { action: 'accept', content };
  });
  client.setRequestHandler('sampling/createMessage', async () => {
    asked.push('sampling');
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: 'Hi!' } };
  });
  client.setRequestHandler('roots/list', async () => {
    asked.push('roots');
    return { roots: [{ uri: 'file:///v2', name: 'v2' }] };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}${path}`), { fetch: set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  clients.push(client);
  return client;
}

for (const backend of ['modern', 'legacy'] as const) {
  describe(`a 2026-07-28 SDK client on /mcp/${backend} (${backend === 'modern' ? 'a 2026-only backend' : 'a 2025-only backend, through the bridge'})`, () => {
    test('tools listed and called; the backend\'s questions answered by the client\'s handlers over rounds', async () => {
      const asked: string[] = [];
      const client = await connect(`/mcp/${backend}`, asked);
      const names: string[] = [];
      for (let cursor: string | undefined, page = 0; page < 20; page++) {
        const listed = await client.listTools(cursor === undefined ? undefined : { cursor });
        names.push(...listed.tools.map((t) => t.name));
        if (!(cursor = listed.nextCursor)) break;
      }
      assert.ok(names.includes('test_simple_text'), names.join(', '));
      assert.equal(textOf(await client.callTool({ name: 'test_simple_text', arguments: {} })), 'This is a simple text response for testing.');
      assert.equal(textOf(await client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} })), 'Multi-round complete for Alice who likes amber');
      assert.deepEqual(asked, ['Step 1: What is your name?', 'Step 2: What is your favorite color?']);
      asked.length = 0;
      const all = textOf(await client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} }));
      assert.match(all, /^Name: Alice; Greeting: Hi!; Roots: 1$/);
      assert.deepEqual([...asked].sort(), ['What is your name?', 'roots', 'sampling']);
    });

    test('URL-mode elicitation: the backend\'s page reaches the client as an input request, the user confirms it in a real browser, the retry completes', async () => {
      const asked: string[] = [];
      const client = await connect(`/mcp/${backend}`, asked);
      assert.equal(textOf(await client.callTool({ name: 'switchboard_url_confirmation', arguments: {} })), 'Confirmed on the page');
      assert.deepEqual(asked, ['Confirm on the page']);
    });

    test('subscriptions/listen: acknowledged, and a tool list change the user triggers arrives', async () => {
      const client = await connect(`/mcp/${backend}`, []);
      let changes = 0;
      client.setNotificationHandler('notifications/tools/list_changed', () => void changes++);
      const subscription = await client.listen({ toolsListChanged: true });
      assert.deepEqual(subscription.honoredFilter, { toolsListChanged: true });
      await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
      for (let i = 0; i < 50 && changes === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(changes, 1);
      await subscription.close();
    });
  });
}

describe('a 2026-07-28 SDK client on /mcp, both backends aggregated', () => {
  test('tools of both, namespaced; a call to each, the 2025 one asking through the bridge', async () => {
    const asked: string[] = [];
    const client = await connect('/mcp', asked);
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes('modern__test_simple_text') && names.includes('legacy__test_simple_text'), names.join(', '));
    assert.equal(textOf(await client.callTool({ name: 'modern__test_simple_text', arguments: {} })), 'This is a simple text response for testing.');
    assert.equal(textOf(await client.callTool({ name: 'legacy__test_input_required_result_elicitation', arguments: {} })), 'Hello, Alice!');
    assert.deepEqual(asked, ['What is your name?']);
    for (const member of ['modern', 'legacy']) {
      assert.equal(textOf(await client.callTool({ name: `${member}__switchboard_url_confirmation`, arguments: {} })), 'Confirmed on the page', member);
    }
  });
});
