/**
 * A backend's one-event SSE answer that has ended when the gateway reads it is answered as
 * that message, with its length, and opens no stream (issue 29). A one-event answer that comes
 * later is relayed on a stream; a client whose connection ended before the answer went out
 * can still resume it with the event id it saw (MCP 2025-11-25 "Resumability and
 * Redelivery"), because the relay stores the stream after all when the response did not
 * finish. Real gateway (memory store, read directly), real server-everything, raw fetch.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { userKeyOf } from '../../src/auth/principal.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';

const VERSION = '2025-11-25';
let oauth: OAuthHandle;
let everything: EverythingHandle;
let gateway: GatewayHandle;
let token = '';

before(async () => {
  [oauth, everything] = await Promise.all([startOAuthServer(), startEverything()]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'everything', url: everything.url, timeout: '30s' }] });
  token = await oauth.token({ sub: 'whole', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([everything?.stop(), oauth?.stop()]);
});

const headers = (sessionId?: string, extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${token}`,
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION } : {}),
  ...extra,
});

async function session(): Promise<string> {
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'whole', version: '1' } } };
  const res = await fetch(gateway.endpoint('everything'), { method: 'POST', headers: headers(), body: JSON.stringify(init), signal: AbortSignal.timeout(10_000) });
  const id = res.headers.get('mcp-session-id');
  await res.body?.cancel();
  assert.ok(id, 'a session id');
  const initialized = await fetch(gateway.endpoint('everything'), { method: 'POST', headers: headers(id), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  await initialized.body?.cancel();
  return id;
}

function call(sessionId: string, id: number, name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
  return fetch(gateway.endpoint('everything'), { method: 'POST', headers: headers(sessionId), body, signal });
}

const streamKey = (sessionId: string, eventId: string) => ({ userKey: userKeyOf(oauth.issuer, 'whole'), sessionId, streamId: eventId.split('-')[0]! });

test('an answer of one event is answered as that message, with its length, and stores nothing', async () => {
  const sessionId = await session();
  const res = await call(sessionId, 2, 'echo', { message: 'whole' }, AbortSignal.timeout(10_000));
  // The response alone, then the end: no stream to resume, so no stream (issue 29).
  assert.equal(res.headers.get('content-type'), 'application/json');
  const text = await res.text();
  assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(text)));
  const answer = JSON.parse(text) as { id?: number; result?: unknown };
  assert.equal(answer.id, 2);
  assert.ok(answer.result, `the answer arrived: ${text}`);
});

test('an answer whose client left before it was written is stored, and resumed with the priming id', async () => {
  const sessionId = await session();
  const abort = new AbortController();
  // No progress token: the backend sends nothing until its answer, one event, a second later.
  const res = await call(sessionId, 3, 'trigger-long-running-operation', { duration: 1, steps: 2 }, abort.signal);
  const reader = new SseReader(res);
  const priming = await reader.next(5_000);
  assert.ok(priming?.id, `a priming event came first: ${JSON.stringify(priming)}`);
  abort.abort();
  await reader.cancel().catch(() => {});
  await new Promise((resolve) => setTimeout(resolve, 1_800)); // the backend answers meanwhile

  const stored = await gateway.app.mcp.store.readEvents(streamKey(sessionId, priming.id));
  assert.ok(stored.some((e) => e.data?.includes('"id":3')), `the answer was stored: ${JSON.stringify(stored)}`);
  const resumed = await fetch(gateway.endpoint('everything'), { headers: headers(sessionId, { accept: 'text/event-stream', 'last-event-id': priming.id }), signal: AbortSignal.timeout(10_000) });
  assert.equal(resumed.status, 200);
  const replay = await new SseReader(resumed).until(() => false, 5_000);
  const answer = replay.map(messageOf).find((m) => m?.id === 3);
  assert.ok(answer && 'result' in answer, `the answer was replayed: ${JSON.stringify(replay)}`);
});
