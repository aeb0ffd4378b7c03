/**
 * What an idle standalone stream keeps (issue 29, bench/README.md "Memory per idle stream"),
 * end to end: the real OAuth server, the gateway in-process with `streams.keepAlive` lowered
 * to 200 ms, and a raw node:http backend that has no standalone stream (GET → 405), so each
 * stream is the gateway's own, as in the bench. Clients are raw sockets.
 *
 * - Keep-alives come from one shared wheel (src/streams/timer-wheel.ts), not a timer per
 *   stream: every idle stream still gets them, repeatedly, and a stream whose client left
 *   leaves the wheel.
 * - Once the stream is set up the gateway drops the request's headers, the bearer token
 *   among them: Node keeps the request for the stream's life.
 * - Once the response head has gone out, the response no longer keeps its text (issue 45 §3).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { keepAliveWheel } from '../../src/streams/sse-writer.js';
import { SSE_KEEP_ALIVE } from '../../src/wire/sse.js';
import { startFirstWinsBackend, type FirstWinsBackend } from '../fixtures/first-wins-backend.js';
import { waitUntil } from '../helpers/child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { rawConnect, type RawConnection } from '../helpers/raw-http.js';
import { sessionClient } from '../helpers/session-client.js';

const BACKEND = 'files';
const KEEP_ALIVE_MS = 200;
const STREAMS = 5;
const DEADLINE_MS = 10_000;

/** The issuer, the backend and the gateway, with the token of the one user and the gateway's side of every GET. */
const rig: { oauth?: OAuthHandle; backend?: FirstWinsBackend; gateway?: GatewayHandle; token: string; getRequests: IncomingMessage[]; getResponses: ServerResponse[] } = { token: '', getRequests: [], getResponses: [] };

before(async () => {
  const [oauth, backend] = await Promise.all([startOAuthServer(), startFirstWinsBackend()]);
  Object.assign(rig, { oauth, backend });
  const overrides = { streams: { keepAlive: `${KEEP_ALIVE_MS}ms` } };
  rig.gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: BACKEND, url: backend.url, timeout: '30s' }], overrides });
  rig.gateway.app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'GET') return;
    rig.getRequests.push(req);
    rig.getResponses.push(res);
  });
  rig.token = await oauth.token({ sub: 'idle', aud: rig.gateway.audience });
});

after(async () => {
  await rig.gateway?.close();
  await Promise.allSettled([rig.oauth?.stop(), rig.backend?.close()]);
});

const client = sessionClient(() => rig.gateway!.endpoint(BACKEND), 'idle-streams');

async function openStandalone(): Promise<RawConnection> {
  const sessionId = await client.initialize(rig.token);
  const conn = await rawConnect(rig.gateway!.url);
  const { host, pathname } = rig.gateway!.endpoint(BACKEND);
  conn.socket.write(
    `GET ${pathname} HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${rig.token}\r\naccept: text/event-stream\r\n` +
      `mcp-session-id: ${sessionId}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n`,
  );
  await waitUntil(async () => (conn.answer().includes('\r\n\r\n') ? true : undefined), { what: 'the stream answers', timeoutMs: DEADLINE_MS, intervalMs: 20 });
  assert.match(conn.answer(), /^HTTP\/1\.1 200 /, conn.answer());
  return conn;
}

const keepAlives = (conn: RawConnection) => conn.answer().split(SSE_KEEP_ALIVE).length - 1;

test('every idle stream gets keep-alives from the shared wheel, and a closed stream leaves it', async () => {
  const wheel = keepAliveWheel(KEEP_ALIVE_MS);
  const before = wheel.size;
  const conns: RawConnection[] = [];
  for (let i = 0; i < STREAMS; i++) conns.push(await openStandalone());
  assert.equal(wheel.size, before + STREAMS, 'each open stream is on the wheel');
  // Bounded wait, no timing asserted: each stream sees keep-alives, more than one.
  await waitUntil(async () => (conns.every((c) => keepAlives(c) >= 3) ? true : undefined), { what: 'keep-alives on every stream', timeoutMs: DEADLINE_MS, intervalMs: 50 });
  const [gone, ...staying] = conns;
  gone!.socket.destroy();
  await waitUntil(async () => (wheel.size === before + STREAMS - 1 ? true : undefined), { what: 'the closed stream leaves the wheel', timeoutMs: DEADLINE_MS, intervalMs: 20 });
  const counts = staying.map(keepAlives);
  await waitUntil(async () => (staying.every((c, i) => keepAlives(c) > counts[i]!) ? true : undefined), { what: 'keep-alives go on', timeoutMs: DEADLINE_MS, intervalMs: 50 });
  for (const c of staying) c.socket.destroy();
  await waitUntil(async () => (wheel.size === before ? true : undefined), { what: 'every stream left the wheel', timeoutMs: DEADLINE_MS, intervalMs: 20 });
});

test('an open standalone stream no longer holds its request headers, the token among them', async () => {
  const seen = rig.getRequests.length;
  const conn = await openStandalone();
  try {
    const req = rig.getRequests[seen];
    assert.ok(req, 'the gateway saw the GET');
    assert.equal(req.headers.authorization, undefined);
    assert.deepEqual(req.rawHeaders, []);
    assert.ok(!req.destroyed, 'the stream is still open');
    // The stream still works: a keep-alive arrives after the headers were dropped.
    await waitUntil(async () => (keepAlives(conn) >= 1 ? true : undefined), { what: 'a keep-alive', timeoutMs: DEADLINE_MS, intervalMs: 50 });
  } finally {
    conn.socket.destroy();
  }
});

test('an open standalone stream no longer keeps the text of its response head once it was sent', async () => {
  const seen = rig.getResponses.length;
  const conn = await openStandalone();
  try {
    const res = rig.getResponses[seen] as ServerResponse & { _header?: unknown; _headerSent?: unknown };
    assert.ok(res, 'the gateway saw the GET');
    // The client got the whole head, the session id in it...
    assert.match(conn.answer(), /\r\nmcp-session-id: [\w-]{43}\r\n/i);
    // ...and the response keeps a short stand-in: still "sent" to Node, none of the headers.
    assert.equal(res._headerSent, true);
    assert.equal(typeof res._header, 'string');
    assert.ok((res._header as string).length > 0 && (res._header as string).length < 16, `kept ${JSON.stringify(res._header)}`);
    assert.equal(res.headersSent, true);
    assert.throws(() => res.writeHead(200), /ERR_HTTP_HEADERS_SENT|Cannot write headers/);
    const before = keepAlives(conn);
    await waitUntil(async () => (keepAlives(conn) > before ? true : undefined), { what: 'a keep-alive after the head was dropped', timeoutMs: DEADLINE_MS, intervalMs: 50 });
  } finally {
    conn.socket.destroy();
  }
});
