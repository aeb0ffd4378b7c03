/**
 * `subscriptions/listen` of a 2026-07-28 client on one replica while another replica reads the
 * 2025-11-25 backend session's GET stream (issue 15; src/stateless/legacy-stream-shares.ts).
 * A backend gives one GET stream per session: the replica whose call opened it first keeps it,
 * and a listen that lands on the other replica hears the session's notifications through it.
 * Two real gateway replicas on one real Redis, the session-era conformance fixture (a v1 SDK
 * server, one GET stream per session, list changes announced there), the raw wire.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

let oauth: OAuthHandle;
let redis: RedisHandle;
let backend: ConformanceServer;
let set: ReplicaSet;

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startConformanceServer({ eras: '2025' })]);
  set = await startReplicas({ count: 2, redisUrl: redis.url, issuer: oauth.issuer, backends: [{ name: 'legacy', url: backend.url, protocol: '2025-11-25' }] });
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.stop(), redis?.stop(), oauth?.stop()]);
});

function post(replica: number, token: string, message: Record<string, unknown>, headers: Record<string, string>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${set.replicas[replica]!.url}/mcp/legacy`, {
    method: 'POST',
    headers: { ...statelessHeaders(token, String(message.method)), ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
    signal,
  });
}

async function call(replica: number, token: string, name: string): Promise<void> {
  const res = await post(replica, token, { id: `call-${name}`, method: 'tools/call', params: { name, arguments: {}, _meta: META } }, { 'mcp-method': 'tools/call', 'mcp-name': name });
  assert.equal(res.status, 200);
  await res.text();
}

describe('subscriptions/listen on the replica that does not read the session\'s GET stream', () => {
  test('the reading replica passes the notifications on: acknowledged, a triggered change heard, tagged', async () => {
    const token = await oauth.token({ sub: 'listens-across-replicas', aud: set.audience });
    // A call through replica 0 opens the session's GET stream there (kept open for a while after).
    await call(0, token, 'test_simple_text');
    const closing = new AbortController();
    const res = await post(1, token, { id: 'listen-b', method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: META } }, { 'mcp-method': 'subscriptions/listen' }, closing.signal);
    if (res.headers.get('content-type') !== 'text/event-stream') assert.fail(`the listen was refused: ${res.status} ${await res.text()}`);
    const events = new SseReader(res);
    const ack = messageOf((await events.next())!);
    assert.equal(ack?.method, 'notifications/subscriptions/acknowledged');
    await call(0, token, 'test_trigger_tool_change');
    const heard = messageOf((await events.next())!);
    assert.equal(heard?.method, 'notifications/tools/list_changed');
    assert.equal((heard?.params as { _meta: Record<string, unknown> })._meta[SUBSCRIPTION_ID], 'listen-b');
    closing.abort();
    // The session goes on after the listen left: a call and another listen, on either replica.
    await call(1, token, 'test_simple_text');
    const leaving = new AbortController();
    const again = await post(1, token, { id: 'listen-c', method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: META } }, { 'mcp-method': 'subscriptions/listen' }, leaving.signal);
    const ackAgain = messageOf((await new SseReader(again).next())!);
    assert.equal(ackAgain?.method, 'notifications/subscriptions/acknowledged');
    leaving.abort();
  });
});
