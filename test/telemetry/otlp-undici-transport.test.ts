/**
 * The OTLP exports' transport (src/telemetry/otlp-undici-transport.ts) against real HTTP servers
 * on 127.0.0.1: what the collector receives, and how each kind of answer — or none — becomes the
 * SDK's export response (success with the body, retryable with `Retry-After`, failure), as the
 * SDK's own `node:http` transport made them.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { OTLPExporterError, type ExportResponse } from '@opentelemetry/otlp-exporter-base';
import { MAX_RESPONSE_BYTES, retryAfterMillis, UndiciOtlpTransport, type OtlpHttpTarget } from '../../src/telemetry/otlp-undici-transport.js';
import { freePort } from '../helpers/free-port.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

const servers: Server[] = [];
after(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));

/** A collector answering each request with `answer`, recording what it received. */
async function collector(answer: (res: ServerResponse) => void): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
      answer(res);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/v1/traces`, received };
}

function target(url: string, extra: Partial<OtlpHttpTarget> = {}): OtlpHttpTarget {
  return { url, headers: async () => ({ 'Content-Type': 'application/json', 'x-tenant': 'acme', 'User-Agent': 'from-config' }), compression: 'none', userAgent: 'switchboard/test', ...extra };
}

const DATA = Buffer.from('{"resourceSpans":[]}');

test('a 2xx answer is a success carrying its body; the collector gets a POST with the headers, the user agent (replacing the config\'s) and the bytes', async () => {
  const c = await collector((res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"partialSuccess":{}}'));
  const transport = new UndiciOtlpTransport(target(c.url));
  const result = await transport.send(DATA, 5000);
  transport.shutdown();
  assert.equal(result.status, 'success');
  assert.equal(Buffer.from((result as { data: Uint8Array }).data).toString(), '{"partialSuccess":{}}');
  assert.equal(c.received.length, 1);
  const [r] = c.received;
  assert.equal(r!.method, 'POST');
  assert.equal(r!.url, '/v1/traces');
  assert.equal(r!.headers['content-type'], 'application/json');
  assert.equal(r!.headers['x-tenant'], 'acme');
  assert.equal(r!.headers['user-agent'], 'switchboard/test');
  assert.equal(r!.headers['content-encoding'], undefined);
  assert.deepEqual(r!.body, DATA);
});

test('compression gzip: the body is gzipped and says so', async () => {
  const c = await collector((res) => res.writeHead(200).end());
  const transport = new UndiciOtlpTransport(target(c.url, { compression: 'gzip' }));
  const result = await transport.send(DATA, 5000);
  transport.shutdown();
  assert.equal(result.status, 'success');
  assert.equal(c.received[0]!.headers['content-encoding'], 'gzip');
  assert.deepEqual(gunzipSync(c.received[0]!.body), DATA);
});

test('429, 502, 503 and 504 are retryable, after the Retry-After asked for; other statuses fail with the SDK error', async () => {
  const statuses = [503, 429, 502, 504, 400, 500];
  let next = 0;
  const c = await collector((res) => {
    const status = statuses[next++]!;
    res.writeHead(status, status === 503 ? { 'retry-after': '2' } : {}).end(status === 400 ? 'bad request body' : '');
  });
  const transport = new UndiciOtlpTransport(target(c.url));
  const results: ExportResponse[] = [];
  for (let i = 0; i < statuses.length; i++) results.push(await transport.send(DATA, 5000));
  transport.shutdown();
  assert.deepEqual(results.slice(0, 4).map((r) => r.status), ['retryable', 'retryable', 'retryable', 'retryable']);
  assert.equal((results[0] as { retryInMillis?: number }).retryInMillis, 2000);
  assert.equal((results[1] as { retryInMillis?: number }).retryInMillis, undefined);
  for (const [i, code] of [[4, 400], [5, 500]] as const) {
    const r = results[i]!;
    assert.equal(r.status, 'failure');
    const error = (r as { error: Error }).error;
    assert.ok(error instanceof OTLPExporterError);
    assert.equal(error.code, code);
  }
  assert.equal(((results[4] as { error: OTLPExporterError }).error).data, 'bad request body');
});

test('a refused connection is retryable, with the connection error', async () => {
  const port = await freePort();
  const transport = new UndiciOtlpTransport(target(`http://127.0.0.1:${port}/v1/metrics`));
  const result = await transport.send(DATA, 5000);
  transport.shutdown();
  assert.equal(result.status, 'retryable');
  assert.equal((result as { error: { code?: string } }).error.code, 'ECONNREFUSED');
});

test('a collector that never answers: the attempt ends at its timeout, retryable', async () => {
  const sockets: Socket[] = [];
  const stalled = createTcpServer((socket) => {
    sockets.push(socket);
    socket.on('data', () => {});
  });
  await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
  const port = (stalled.address() as { port: number }).port;
  const transport = new UndiciOtlpTransport(target(`http://127.0.0.1:${port}/v1/traces`));
  const started = Date.now();
  const result = await transport.send(DATA, 300);
  const took = Date.now() - started;
  transport.shutdown();
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => stalled.close(resolve));
  assert.equal(result.status, 'retryable');
  assert.equal((result as { error: Error }).error.message, 'Request timed out');
  assert.ok(took >= 250 && took < 5000, `ended after ${took} ms`);
});

test('an answer larger than the cap fails the export, unread past it', async () => {
  const c = await collector((res) => {
    res.writeHead(200);
    res.end(Buffer.alloc(MAX_RESPONSE_BYTES + 1024, 0x61));
  });
  const transport = new UndiciOtlpTransport(target(c.url));
  const result = await transport.send(DATA, 5000);
  transport.shutdown();
  assert.equal(result.status, 'failure');
  assert.match((result as { error: Error }).error.message, /larger than/);
});

test('Retry-After: seconds, an HTTP date, and what cannot be read', () => {
  assert.equal(retryAfterMillis('3'), 3000);
  assert.equal(retryAfterMillis(['7']), 7000);
  assert.equal(retryAfterMillis(undefined), undefined);
  assert.equal(retryAfterMillis('soon'), undefined);
  assert.equal(retryAfterMillis(new Date(Date.now() - 60_000).toUTCString()), 0);
  const later = retryAfterMillis(new Date(Date.now() + 60_000).toUTCString())!;
  assert.ok(later > 55_000 && later <= 60_000, String(later));
});
