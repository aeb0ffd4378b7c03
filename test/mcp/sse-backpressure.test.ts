/**
 * SSE backpressure (`streams.maxBufferedBytes`, src/streams/sse-writer.ts, issue 13), end to end:
 * the real OAuth server, the gateway in-process with the bound lowered to 256 KiB, and a raw
 * node:http backend whose `flood` tool answers with 32 MiB of SSE as fast as the gateway
 * reads it. The client reads the stream's first event (its priming id) and then nothing.
 * What the gateway holds for that client stays near the bound and the stream is ended
 * (before: the gateway's socket buffer grew with everything the backend sent); the answer is
 * not lost: the client resumes with Last-Event-ID and gets the result from the replay log.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startFirstWinsBackend, type FirstWinsBackend } from '../fixtures/first-wins-backend.js';
import { waitUntil } from '../helpers/child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { mcpPostHead, rawConnect } from '../helpers/raw-http.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';

const BACKEND = 'files';
const LIMIT = 256 * 1024;
/** One tick's events may land on top of the bound before the check: a generous allowance. */
const SLACK = 2 * 1024 * 1024;
const EVENTS = 1_000;
const EVENT_BYTES = 32 * 1024;
const DEADLINE_MS = 30_000;
/** Kept for Last-Event-ID: their replay on resumption stays under the bound. */
const REPLAY_EVENTS = 5;

let oauth: OAuthHandle | undefined;
let backend: FirstWinsBackend | undefined;
let gateway: GatewayHandle | undefined;
let token = '';
/** The gateway's side of every connection, by the client's port. */
const serverSockets = new Map<number, Socket>();

before(async () => {
  [oauth, backend] = await Promise.all([startOAuthServer(), startFirstWinsBackend()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: BACKEND, url: backend.url, timeout: '30s' }],
    overrides: { streams: { maxBufferedBytes: LIMIT, replayEvents: REPLAY_EVENTS } },
  });
  gateway.app.server.on('connection', (socket: Socket) => serverSockets.set(socket.remotePort!, socket));
  token = await oauth.token({ sub: 'alice', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), backend?.close()]);
});

const headers = () => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' });

describe('streams.maxBufferedBytes', () => {
  test('a client that stops reading an SSE answer has it ended near the bound, and resumes it with Last-Event-ID', async () => {
    const init = await fetch(gateway!.endpoint(BACKEND), {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.arrayBuffer();

    const call = JSON.stringify({ jsonrpc: '2.0', id: 'flood-1', method: 'tools/call', params: { name: 'flood', arguments: { events: EVENTS, eventBytes: EVENT_BYTES } } });
    const client = await rawConnect(gateway!.url);
    // Reads up to the priming event's id, then nothing more.
    client.socket.on('data', () => {
      if (/\nid: \S+\n/.test(client.answer())) client.socket.pause();
    });
    client.socket.write(mcpPostHead(gateway!.url, `/mcp/${BACKEND}`, token, Buffer.byteLength(call), sessionId) + call);
    const server = await waitUntil(async () => serverSockets.get(client.socket.localPort!), { what: "the gateway's socket", timeoutMs: DEADLINE_MS });

    let most = 0;
    await waitUntil(
      async () => {
        most = Math.max(most, server.writableLength);
        return server.destroyed ? true : undefined;
      },
      { what: 'the gateway to end the unread stream', details: () => `the most it buffered for the client: ${most} bytes`, timeoutMs: DEADLINE_MS, intervalMs: 10 },
    );
    assert.ok(most <= LIMIT + SLACK, `the gateway buffered ${most} bytes for a client that does not read`);
    assert.match(client.answer(), /^HTTP\/1\.1 200 /);
    const primingId = /\nid: (\S+)\n/.exec(client.answer())![1]!;
    client.socket.destroy();

    // Nothing lost: once the backend has sent everything, the answer is in the replay log.
    await waitUntil(async () => (backend!.floodedBytes() >= EVENTS * EVENT_BYTES ? true : undefined), { what: 'the backend to finish its answer', timeoutMs: DEADLINE_MS });
    const resumed = await fetch(gateway!.endpoint(BACKEND), {

      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25', 'last-event-id': primingId },
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    assert.equal(resumed.status, 200);
    const reader = new SseReader(resumed);
    const events = await reader.until((e) => messageOf(e)?.id === 'flood-1', DEADLINE_MS);
    await reader.cancel();
    assert.deepEqual(messageOf(events.at(-1)!)?.result, { content: [{ type: 'text', text: 'flooded' }] });
  });
});
