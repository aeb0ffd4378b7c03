/**
 * The gateway's HTTP exchange with a backend (src/backends/exchange.ts) against a real
 * node:http server: whole bodies, flow control on a big body read slowly, stopping early,
 * `dump()` keeping the connection, aborts before and after the headers, timeouts, and a
 * backend that dies mid-body.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Agent } from 'undici';
import { exchange, type ExchangeOptions } from '../../src/backends/exchange.js';

type Route = (req: IncomingMessage, res: ServerResponse) => void;

describe('exchange (undici dispatch with a queue body)', () => {
  const routes = new Map<string, Route>();
  /** Remote ports of the sockets that served each path, to see connection reuse. */
  const sockets: Array<{ path: string; port: number }> = [];
  const closed = new Set<string>();
  let server: Server;
  let origin: string;
  const agent = new Agent({ keepAliveTimeout: 10_000 });

  before(async () => {
    server = createServer((req, res) => {
      sockets.push({ path: req.url!, port: req.socket.remotePort! });
      res.on('close', () => {
        if (!res.writableFinished) closed.add(req.url!);
      });
      const route = routes.get(req.url!);
      if (route) route(req, res);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await agent.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const send = (path: string, extra: Partial<ExchangeOptions> = {}) =>
    exchange(agent, { origin, path, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ping":1}', headersTimeout: 5_000, bodyTimeout: 5_000, ...extra });

  test('status, parsed headers and the whole body, sent in several chunks', async () => {
    routes.set('/chunks', (req, res) => {
      let received = '';
      req.on('data', (c: Buffer) => (received += c.toString()));
      req.on('end', () => {
        res.writeHead(201, { 'content-type': 'application/json', 'Mcp-Session-Id': 'abc' });
        res.write('{"echo":');
        setTimeout(() => res.end(`${received}}`), 20);
      });
    });
    const res = await send('/chunks');
    assert.equal(res.status, 201);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal(res.headers['mcp-session-id'], 'abc');
    assert.equal(await res.body.text(), '{"echo":{"ping":1}}');
  });

  test('a 4 MiB body read slowly arrives whole and in order (the socket is paused, not buffered without bound)', async () => {
    const block = Buffer.alloc(64 * 1024);
    routes.set('/big', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let i = 0;
      const more = () => {
        while (i < 64) {
          block.fill(i % 251);
          if (!res.write(Buffer.from(block))) {
            i++;
            res.once('drain', more);
            return;
          }
          i++;
        }
        res.end();
      };
      more();
    });
    const res = await send('/big', { method: 'GET', body: undefined });
    let total = 0;
    let expected = 0;
    let offset = 0;
    for await (const chunk of res.body) {
      for (let k = 0; k < chunk.length; k++) {
        if (chunk[k] !== expected % 251) assert.fail(`byte ${total + k} is ${chunk[k]}, expected ${expected % 251}`);
        offset++;
        if (offset === block.length) {
          offset = 0;
          expected++;
        }
      }
      total += chunk.length;
      // A slow reader: the backend must wait for us rather than the gateway buffering it all.
      if (total % (512 * 1024) < chunk.length) await new Promise((r) => setTimeout(r, 5));
    }
    assert.equal(total, 64 * block.length);
  });

  test('destroy() stops an endless body and closes its connection', async () => {
    routes.set('/endless', endlessEvents);
    const res = await send('/endless', { method: 'GET', body: undefined, bodyTimeout: 0 });
    let events = 0;
    for await (const chunk of res.body) {
      events += chunk.toString().split('data:').length - 1;
      if (events >= 3) res.body.destroy();
    }
    assert.ok(events >= 3);
    await waitFor(() => closed.has('/endless'), 'the backend sees its response closed');
  });

  test('breaking out of the iteration also gives the body up', async () => {
    routes.set('/endless-2', endlessEvents);
    const res = await send('/endless-2', { method: 'GET', body: undefined, bodyTimeout: 0 });
    for await (const chunk of res.body) if (chunk.length) break;
    await waitFor(() => closed.has('/endless-2'), 'the backend sees its response closed');
  });

  test('dump() reads a small rest and keeps the connection for the next request', async () => {
    routes.set('/small', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"a":');
      setTimeout(() => res.end('1}'), 10);
    });
    routes.set('/next', (_req, res) => res.writeHead(204).end());
    // One connection: were it closed by dump(), the next request would need a new one.
    const single = new Agent({ connections: 1, keepAliveTimeout: 10_000 });
    const options = { origin, method: 'POST' as const, headers: {}, body: '{}', headersTimeout: 5_000, bodyTimeout: 5_000 };
    const res = await exchange(single, { ...options, path: '/small' });
    await res.body.dump();
    const next = await exchange(single, { ...options, path: '/next' });
    await next.body.dump();
    await single.close();
    assert.equal(next.status, 204);
    const small = sockets.filter((s) => s.path === '/small').at(-1)!;
    const following = sockets.filter((s) => s.path === '/next').at(-1)!;
    assert.equal(following.port, small.port, 'the same keep-alive connection served both');
  });

  test('an abort before the headers rejects; after them, the body read fails', async () => {
    routes.set('/slow-headers', (_req, res) => {
      setTimeout(() => res.writeHead(200).end('late'), 2_000).unref();
    });
    const early = new AbortController();
    const pending = send('/slow-headers', { signal: early.signal });
    setTimeout(() => early.abort(), 20);
    await assert.rejects(pending, (err: Error) => err.name === 'AbortError');

    const already = new AbortController();
    already.abort();
    await assert.rejects(send('/slow-headers', { signal: already.signal }), (err: Error) => err.name === 'AbortError');

    routes.set('/slow-body', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
    });
    const late = new AbortController();
    const res = await send('/slow-body', { signal: late.signal, method: 'GET', body: undefined, bodyTimeout: 0 });
    const reading = (async () => {
      for await (const _chunk of res.body) late.abort();
    })();
    await assert.rejects(reading, (err: Error) => err.name === 'AbortError');
  });

  test('headers and body timeouts surface as undici timeout errors', async () => {
    routes.set('/never', () => {});
    await assert.rejects(send('/never', { headersTimeout: 100 }), (err: Error & { code?: string }) => err.code === 'UND_ERR_HEADERS_TIMEOUT');
    routes.set('/stalls', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
    });
    const res = await send('/stalls', { bodyTimeout: 150 });
    await assert.rejects(res.body.text(), (err: Error & { code?: string }) => err.code === 'UND_ERR_BODY_TIMEOUT');
  });

  test('a backend that dies mid-body fails the read', async () => {
    routes.set('/dies', (req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      setTimeout(() => req.socket.destroy(), 20);
    });
    const res = await send('/dies', { method: 'GET', body: undefined, bodyTimeout: 0 });
    await assert.rejects(res.body.bytes(), (err: Error & { code?: string }) => typeof err.code === 'string' && err.code.startsWith('UND_ERR'));
  });
});

/** A backend stream that never ends: an event every 5 ms until the client goes. */
function endlessEvents(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const timer = setInterval(() => res.write('data: {}\n\n'), 5);
  res.on('close', () => clearInterval(timer));
}

async function waitFor(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`timed out waiting until ${what}`);
}
