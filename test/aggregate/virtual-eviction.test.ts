/**
 * A virtual server's session (`/mcp/{name}`, issue 31 §1) evicted under `sessions.maxPerUser`
 * (issue 28 §7; mcp/session-eviction.ts) ends as a `/mcp/{backend}` session does: its open
 * stream stops, its next request gets 404, and the member sessions it opened on the backend
 * are ended (DELETE), so they do not linger there. Real gateway on a real Redis, real SDK
 * backend (test/fixtures/paging-backend.ts), which counts its open sessions.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitUntil } from '../helpers/child.js';
import { startPagingGateway, type PagingGateway } from '../helpers/paging-gateway.js';
import { SESSION_VERSION, sessionClient } from '../helpers/session-client.js';
import { SseReader } from '../helpers/sse-client.js';

let stack: PagingGateway;

before(async () => {
  stack = await startPagingGateway({ sessions: { maxPerUser: 1 }, servers: [{ name: 'desk', tools: [{ from: 'paging.t01', as: 'first' }] }] });
});

after(() => stack?.stop());

test('an evicted virtual-server session: its stream ends, its next request gets 404, its member session on the backend is ended', async () => {
  const token = await stack.oauth.token({ sub: 'evicted-desk-user', aud: stack.gateway.audience });
  const desk = sessionClient(() => stack.gateway.endpoint('desk'), 'virtual-eviction-test');
  const paging = sessionClient(() => stack.gateway.endpoint('paging'), 'virtual-eviction-test');

  const session = await desk.initialize(token);
  const call = await desk.post(token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'first', arguments: {} } }, session);
  assert.equal(call.status, 200);
  assert.equal(stack.backend.sessions(), 1, 'the virtual server opened its member session on the backend');
  const get = await fetch(stack.gateway.endpoint('desk'), { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': SESSION_VERSION } });
  assert.equal(get.status, 200);
  const stream = new SseReader(get);

  // The cap is 1: the user's next session evicts this one (in use, but none is idle).
  const other = await paging.initialize(token);

  assert.equal(await stream.until(() => false, 10_000).then((events) => events.filter((e) => e.data).length), 0, 'the stream ends, with nothing more on it');
  assert.equal(await desk.pingStatus(token, session), 404);
  assert.equal(await paging.pingStatus(token, other), 200);
  // The other session's own backend session stays; the evicted one's member session goes.
  await waitUntil(async () => (stack.backend.sessions() === 1 ? true : undefined), { what: 'the member session of the evicted one to be ended on the backend', timeoutMs: 10_000, intervalMs: 50, details: () => `open backend sessions: ${stack.backend.sessions()}` });
  const metrics = await (await fetch(`${stack.gateway.url}/metrics`)).text();
  assert.match(metrics, /^switchboard_sessions_ended_total\{backend="desk",reason="evicted"\} 1$/m);
});
