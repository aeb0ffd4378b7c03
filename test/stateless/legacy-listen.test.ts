/**
 * `subscriptions/listen` of a 2026-07-28 client on a 2025-11-25 backend (issue 15; src/stateless/
 * legacy-listen.ts), on the raw wire, through a real gateway, against the conformance fixture of
 * the session era (a v1 SDK server that announces list changes on its standalone GET stream):
 * the acknowledgement first with the honoured subset, the backend's notifications filtered and
 * tagged with the listen's id, what the user's own calls trigger heard on the stream.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

let oauth: OAuthHandle;
let backend: ConformanceServer;
let gateway: GatewayHandle;

before(async () => {
  [oauth, backend] = await Promise.all([startOAuthServer(), startConformanceServer({ eras: '2025' })]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'legacy', url: backend.url, protocol: '2025-11-25' }] });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([backend?.stop(), oauth?.stop()]);
});

function post(token: string, message: Record<string, unknown>, headers: Record<string, string>): Promise<Response> {
  return fetch(gateway.endpoint('legacy'), {
    method: 'POST',
    headers: { ...statelessHeaders(token, String(message.method)), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
}

const listen = (token: string, id: string, notifications: Record<string, unknown>) =>
  post(token, { id, method: 'subscriptions/listen', params: { notifications, _meta: META } }, { 'mcp-method': 'subscriptions/listen' });

const trigger = async (token: string) => {
  const res = await post(token, { id: 9, method: 'tools/call', params: { name: 'test_trigger_tool_change', arguments: {}, _meta: META } }, { 'mcp-method': 'tools/call', 'mcp-name': 'test_trigger_tool_change' });
  assert.equal(res.status, 200);
  await res.text();
};

describe('subscriptions/listen through the bridge to a 2025 backend', () => {
  test('acknowledged first with the honoured subset; a change the user triggers arrives tagged with the listen id', async () => {
    const token = await oauth.token({ sub: 'listener', aud: gateway.audience });
    const res = await listen(token, 'listen-1', { toolsListChanged: true, resourceSubscriptions: ['test://static-text'], somethingElse: true });
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const events = new SseReader(res);
    const ack = messageOf((await events.next())!);
    assert.equal(ack?.method, 'notifications/subscriptions/acknowledged');
    const params = ack?.params as { notifications: unknown; _meta: Record<string, unknown> };
    assert.deepEqual(params.notifications, { toolsListChanged: true, resourceSubscriptions: ['test://static-text'] });
    assert.equal(params._meta[SUBSCRIPTION_ID], 'listen-1');
    await trigger(token);
    // The backend also announces the subscribed resource once, 100 ms after the subscription (conformance-server.ts): either may come first.
    const heard: Array<Record<string, unknown> | undefined> = [];
    while (heard.length < 2 && !heard.some((m) => m?.method === 'notifications/tools/list_changed')) heard.push(messageOf((await events.next(5_000))!));
    assert.ok(heard.some((m) => m?.method === 'notifications/tools/list_changed'), JSON.stringify(heard));
    for (const message of heard) {
      assert.ok(['notifications/tools/list_changed', 'notifications/resources/updated'].includes(String(message?.method)), JSON.stringify(message));
      assert.equal((message?.params as { _meta: Record<string, unknown> })._meta[SUBSCRIPTION_ID], 'listen-1');
    }
    await events.cancel();
  });

  test('the filter is enforced: a change the client did not ask for never reaches it', async () => {
    const token = await oauth.token({ sub: 'prompt-listener', aud: gateway.audience });
    const events = new SseReader(await listen(token, 'listen-2', { promptsListChanged: true }));
    const ack = messageOf((await events.next())!);
    assert.deepEqual((ack?.params as { notifications: unknown }).notifications, { promptsListChanged: true });
    await trigger(token);
    await assert.rejects(events.next(700), /no SSE event within 700 ms/);
    await events.cancel();
  });
});
