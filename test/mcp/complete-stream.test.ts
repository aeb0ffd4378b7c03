/**
 * A backend's SSE answer that has all arrived and ends with the response — progress, then the
 * result — is sent as one SSE response with its length, without a relay (src/mcp/complete-stream.ts,
 * issue 29). What the relay gave such an answer must still hold when the client is gone before
 * it is written: the stream is stored, and a GET with `Last-Event-ID` on it replays the rest
 * (MCP 2025-11-25 "Resumability and Redelivery"). Real in-process gateway (memory store, read
 * directly), real OAuth server, a raw node:http backend that answers a call late, in one write
 * with its length, as an SDK server with an event store answers once its work is done.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { userKeyOf } from '../../src/auth/principal.js';
import { newStreamId } from '../../src/mcp/stream-service.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { SESSION_VERSION, sessionClient } from '../helpers/session-client.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';

const SUB = 'complete';
/** How long the backend takes with a call: the client leaves well before. */
const ANSWER_DELAY_MS = 400;

let oauth: OAuthHandle;
let gateway: GatewayHandle;
let backend: http.Server;
let token = '';
let answered: () => void = () => {};

const progress = (n: number) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: n, total: 2 } });

before(async () => {
  backend = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const rpc = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: number; method?: string };
      if (rpc.method === 'initialize') {
        const result = { protocolVersion: SESSION_VERSION, capabilities: { tools: {} }, serverInfo: { name: 'late', version: '1' } };
        return void res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'late-session' }).end(JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result }));
      }
      if (rpc.id === undefined) return void res.writeHead(202).end();
      setTimeout(() => {
        const answer = JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result: { content: [{ type: 'text', text: 'done' }] } });
        const body = [progress(1), progress(2), answer].map((data) => `event: message\ndata: ${data}\n\n`).join('');
        res.writeHead(200, { 'content-type': 'text/event-stream' }).end(body);
        answered();
      }, ANSWER_DELAY_MS);
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  oauth = await startOAuthServer();
  const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}/mcp`;
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'late', url, timeout: '10s' }] });
  token = await oauth.token({ sub: SUB, aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await new Promise((resolve) => backend?.close(resolve));
  await oauth?.stop();
});

/** The headers of a GET resuming a stream of the session (MCP 2025-11-25 "Resumability and Redelivery"). */
const resumeHeaders = (bearer: string, sessionId: string, lastEventId: string) => ({
  authorization: `Bearer ${bearer}`,
  accept: 'text/event-stream',
  'mcp-session-id': sessionId,
  'mcp-protocol-version': SESSION_VERSION,
  'last-event-id': lastEventId,
});

test('a complete answer whose client left before it was written is stored, and resumed from its priming id', async () => {
  const client = sessionClient(() => gateway.endpoint('late'), 'complete');
  const sessionId = await client.initialize(token);
  // The stream id the gateway draws next (one counter per process; the gateway runs in this one).
  const drawn = newStreamId();
  const streamId = `${drawn.slice(0, -8)}${(Number.parseInt(drawn.slice(-8), 16) + 1).toString(16).padStart(8, '0')}`;
  const written = new Promise<void>((resolve) => (answered = resolve));
  const abort = new AbortController();
  const call = client.post(token, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'work', arguments: {} } }, sessionId, abort.signal);
  setTimeout(() => abort.abort(), ANSWER_DELAY_MS / 4);
  await assert.rejects(call, { name: 'AbortError' });
  await written;

  const key = { userKey: userKeyOf(oauth.issuer, SUB), sessionId, streamId };
  let stored = await gateway.app.mcp.store.readEvents(key);
  for (let i = 0; i < 50 && !stored.length; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    stored = await gateway.app.mcp.store.readEvents(key);
  }
  assert.deepEqual(
    stored.map((e) => {
      if (e.meta) return 'meta';
      if (e.end) return 'end';
      const message = JSON.parse(e.data!) as { method?: string; id?: number };
      return message.method ?? `response ${message.id}`;
    }),
    ['meta', 'notifications/progress', 'notifications/progress', 'response 7', 'end'],
    'the whole stream, as the relay stores it',
  );

  // The client comes back with the id of the priming event it would have seen first.
  const resumed = await fetch(gateway.endpoint('late'), { headers: resumeHeaders(token, sessionId, `${streamId}-0`), signal: AbortSignal.timeout(10_000) });
  assert.equal(resumed.status, 200);
  const replay = await new SseReader(resumed).until(() => false, 5_000);
  assert.deepEqual(replay.map((e) => e.id), [1, 2, 3].map((n) => `${streamId}-${n}`));
  const answer = replay.map(messageOf).find((m) => m?.id === 7);
  assert.ok(answer && 'result' in answer, `the answer was replayed: ${JSON.stringify(replay)}`);
});

test("another user cannot resume the stored stream: it is the caller's", async () => {
  // The replay log is keyed by the user (SPEC §5): a second user naming the same session and
  // event id finds no session.
  const sessionId = await sessionClient(() => gateway.endpoint('late'), 'complete').initialize(token);
  const other = await oauth.token({ sub: 'someone-else', aud: gateway.audience });
  const res = await fetch(gateway.endpoint('late'), { headers: resumeHeaders(other, sessionId, 'ffffffffffffffff-0') });
  assert.equal(res.status, 404);
  await res.body?.cancel();
});
