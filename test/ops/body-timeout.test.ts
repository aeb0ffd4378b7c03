/**
 * The body read timeout (`limits.bodyTimeout`, src/http/body-timeout.ts, issue 13), end to end:
 * the real OAuth server, the gateway in-process with the timeout lowered to 1 s, and a raw
 * node:http backend. A POST whose body stops halfway gets 408 and its socket is closed
 * (before: it stayed open for ever); a body that arrives slowly but within the timeout is
 * served; and a long SSE response outlives the timeout many times over (the timeout bounds
 * receiving the request, never the answer). Waits are bounded; no timing is asserted
 * beyond "happened before a generous deadline".
 */
import assert from 'node:assert/strict';
import type net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startFirstWinsBackend, type FirstWinsBackend } from '../fixtures/first-wins-backend.js';
import { waitUntil } from '../helpers/child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { mcpPostHead, rawConnect, type RawConnection } from '../helpers/raw-http.js';

const BACKEND = 'files';
const DEADLINE_MS = 10_000;

let oauth: OAuthHandle | undefined;
let backend: FirstWinsBackend | undefined;
let gateway: GatewayHandle | undefined;
let token = '';
const sockets: net.Socket[] = [];

before(async () => {
  [oauth, backend] = await Promise.all([startOAuthServer(), startFirstWinsBackend()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: BACKEND, url: backend.url, timeout: '10s' }],
    overrides: { limits: { bodyTimeout: '1s' }, streams: { keepAlive: '200ms' } },
  });
  token = await oauth.token({ sub: 'alice', aud: gateway.audience });
});

after(async () => {
  for (const s of sockets) s.destroy();
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), backend?.close()]);
});

const connect = (): Promise<RawConnection> =>
  rawConnect(gateway!.url).then((c) => {
    sockets.push(c.socket);
    return c;
  });
const postHead = (bodyLength: number) => mcpPostHead(gateway!.url, `/mcp/${BACKEND}`, token, bodyLength);

const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } });

describe('limits.bodyTimeout', () => {
  test('a body that stops halfway gets 408 and the socket is closed', async () => {
    const c = await connect();
    c.socket.write(postHead(INITIALIZE.length) + INITIALIZE.slice(0, 20));
    await waitUntil(async () => (c.closed() ? true : undefined), { what: 'the gateway to close the stalled request', timeoutMs: DEADLINE_MS, intervalMs: 50 });
    assert.match(c.answer(), /^HTTP\/1\.1 408 /);
    const body = JSON.parse(c.answer().slice(c.answer().indexOf('\r\n\r\n') + 4)) as { id: unknown; error: { code: number; message: string } };
    assert.equal(body.id, null);
    assert.equal(body.error.code, -32600);
    assert.match(body.error.message, /limits\.bodyTimeout/);
    assert.deepEqual(backend!.methods, [], 'nothing reached the backend');
  });

  test('a body that arrives slowly but within the timeout is served', async () => {
    const c = await connect();
    c.socket.write(postHead(INITIALIZE.length) + INITIALIZE.slice(0, 20));
    await new Promise((resolve) => setTimeout(resolve, 200));
    c.socket.write(INITIALIZE.slice(20));
    await waitUntil(async () => (c.answer().includes('"protocolVersion"') ? true : undefined), { what: 'the initialize answer', timeoutMs: DEADLINE_MS, intervalMs: 20 });
    assert.match(c.answer(), /^HTTP\/1\.1 200 /);
  });

  test('an SSE response lives on well past the timeout', async () => {
    const init = await fetch(gateway!.endpoint(BACKEND), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: INITIALIZE,
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    assert.equal(init.status, 200);
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.arrayBuffer();
    const c = await connect();
    const { host } = new URL(gateway!.url);
    c.socket.write(`GET /mcp/${BACKEND} HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\nmcp-session-id: ${sessionId}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n`);
    await waitUntil(async () => (c.answer().includes('text/event-stream') ? true : undefined), { what: 'the GET stream to open', timeoutMs: DEADLINE_MS, intervalMs: 20 });
    // Three timeouts (and many of Node's checks) later the stream is open and still alive.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const seen = c.answer().length;
    await waitUntil(async () => (c.answer().length > seen ? true : undefined), { what: 'a keep-alive after 3 s', timeoutMs: DEADLINE_MS, intervalMs: 20 });
    assert.equal(c.closed(), false);
    assert.doesNotMatch(c.answer(), /408/);
  });
});
