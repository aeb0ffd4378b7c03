/**
 * A 2025-11-25 client (the official v1 SDK client) of a 2026-07-28-only backend that answers as
 * the conformance suite's current reference server does: `subscriptions/listen` as JSON lines
 * kept open (test/fixtures/json-lines-listen.ts), and a call with progress as JSON lines too
 * (issue 29, "Streams sent as JSON lines"; src/backends/modern/, src/backends/backend-messages.ts).
 * The client's GET stream is made of that listen: the list changes and the updates of the
 * resources it subscribed to reach it, on the one GET it opened, across the gateway opening the
 * listen again when the subscriptions change.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

let oauth: OAuthHandle;
let backend: ConformanceServer;
let gateway: GatewayHandle;
let client: Client;
let toolChanges = 0;
const updated: string[] = [];
/** The client's GET requests: the standalone stream it opened, and any it had to open again. */
let gets = 0;

const textOf = (result: unknown) => ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text).join(' ');

/** Calls `trigger` until `arrived()` (the announcement may precede the listen being open), at most 20 times. */
async function until(arrived: () => boolean, trigger: () => Promise<unknown>): Promise<void> {
  for (let round = 0; round < 20 && !arrived(); round++) {
    await trigger();
    for (let i = 0; i < 10 && !arrived(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

before(async () => {
  [oauth, backend] = await Promise.all([startOAuthServer(), startConformanceServer({ eras: '2026', listen: 'json-lines' })]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'modern', url: backend.url }] });
  const token = await oauth.token({ sub: 'json-lines-user', aud: gateway.audience });
  client = new Client({ name: 'json-lines-client', version: '1.0.0' }, { capabilities: {} });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void toolChanges++);
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
  const counting: typeof fetch = (input, init) => {
    if ((init?.method ?? 'GET') === 'GET') gets++;
    return fetch(input, init);
  };
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('modern'), { fetch: counting, requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
});

after(async () => {
  await client?.close().catch(() => {});
  await gateway?.close();
  await Promise.allSettled([backend?.stop(), oauth?.stop()]);
});

describe('a 2025-11-25 SDK client of a 2026-07-28 backend answering as JSON lines', () => {
  test('the GET stream carries the listen: a tool list change, then a subscribed resource\'s update after the listen is opened again, then a list change again', async () => {
    await until(() => toolChanges > 0, () => client.callTool({ name: 'test_trigger_tool_change', arguments: {} }));
    assert.ok(toolChanges > 0, 'no notifications/tools/list_changed on the GET stream');

    // The subscription makes the gateway open the listen again with the resource in its filter.
    assert.deepEqual(await client.subscribeResource({ uri: 'test://watched-resource' }), {});
    await until(() => updated.length > 0, () => client.callTool({ name: 'switchboard_trigger_watched_update', arguments: {} }));
    assert.equal(updated[0], 'test://watched-resource');

    const before = toolChanges;
    await until(() => toolChanges > before, () => client.callTool({ name: 'test_trigger_tool_change', arguments: {} }));
    assert.ok(toolChanges > before, 'no list change after the listen was opened again');
    assert.equal(gets, 1, 'the client had to open its GET stream again');
  });

  test('a call answered as JSON lines, progress then the result, slowly or in one write: the client gets both', async () => {
    for (const delayMs of [200, 0]) {
      const progress: string[] = [];
      const result = await client.callTool({ name: 'switchboard_json_lines_progress', arguments: { delayMs } }, undefined, {
        onprogress: (p) => void progress.push(`${p.progress}/${p.total} ${p.message}`),
      });
      assert.equal(textOf(result), 'done after progress', `delayMs ${delayMs}`);
      assert.deepEqual(progress, ['1/2 half way'], `delayMs ${delayMs}`);
    }
  });
});
