/**
 * The era probe (issue 15, "Talking to 2026-07-28 backends"; Transports §Backward
 * Compatibility): `server/discover` sent to real servers of each era, built with the SDKs
 * (test/fixtures/era-backends.ts), and to a plain HTTP server answering as other servers do
 * (a 404 page, 405, a stream that stays open, an outage).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { probeEra, type ProbeOutcome } from '../../src/backends/era-probe.js';
import { StreamableHttpBackend } from '../../src/backends/streamable-http.js';
import { parseConfig } from '../../src/config/load.js';
import { startEraBackend, type EraBackend } from '../fixtures/era-backends.js';

const CLIENT = { name: 'switchboard', version: '0.1.0' };
const backends: EraBackend[] = [];
let canned: http.Server;
let cannedUrl: string;
let answer: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.writeHead(500).end();

before(async () => {
  canned = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => canned.listen(0, '127.0.0.1', resolve));
  cannedUrl = `http://127.0.0.1:${(canned.address() as { port: number }).port}/mcp`;
});

after(async () => {
  canned.closeAllConnections();
  await new Promise<void>((resolve) => canned.close(() => resolve()));
  for (const b of backends) await b.close();
});

function backendAt(url: string): StreamableHttpBackend {
  const config = parseConfig({ publicUrl: 'http://127.0.0.1:1', auth: { issuer: 'https://idp.example.com', audience: 'a' }, backends: [{ name: 'b', url }] });
  return new StreamableHttpBackend(config.backends[0]!);
}

async function probe(url: string, authorization?: string, timeoutMs = 5_000): Promise<ProbeOutcome> {
  const b = backendAt(url);
  try {
    return await probeEra(b, { authorization, timeoutMs, clientInfo: CLIENT });
  } finally {
    await b.close();
  }
}

async function start(kind: 'modern' | 'dual' | 'legacy', token?: string): Promise<EraBackend> {
  const b = await startEraBackend(kind, { token });
  backends.push(b);
  return b;
}

function json(status: number, body: unknown): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (_req, res) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

test('a 2026-only server (v2 SDK, legacy rejected) is modern; its DiscoverResult is kept', async () => {
  const b = await start('modern');
  const outcome = await probe(b.url);
  assert.equal(outcome.decided?.era, '2026-07-28', outcome.why);
  const discover = outcome.decided!.discover!;
  assert.deepEqual(discover.supportedVersions, ['2026-07-28']);
  assert.ok((discover.capabilities as Record<string, unknown>).tools);
  assert.deepEqual((discover._meta as Record<string, unknown>)['io.modelcontextprotocol/serverInfo'], { name: 'era-modern', version: '1.0.0' });
});

test('the probe is a well-formed 2026 request: headers, _meta with the gateway as client', async () => {
  const b = await start('modern');
  await probe(b.url);
  const request = b.seen.at(-1)!;
  assert.equal(request.httpMethod, 'POST');
  assert.equal(request.rpcMethod, 'server/discover');
  assert.equal(request.headers['mcp-protocol-version'], '2026-07-28');
  assert.equal(request.headers['mcp-method'], 'server/discover');
  assert.match(String(request.headers.accept), /application\/json.*text\/event-stream/);
  assert.equal(request.headers['mcp-session-id'], undefined);
});

test('a dual-era server (the same handler serving legacy traffic) is modern', async () => {
  const b = await start('dual');
  const outcome = await probe(b.url);
  assert.equal(outcome.decided?.era, '2026-07-28', outcome.why);
  assert.ok(outcome.decided!.discover);
});

test('a 2025-only server (v1 SDK, sessions) is legacy: 400 with a -32000 "not initialized"', async () => {
  const b = await start('legacy');
  const outcome = await probe(b.url);
  assert.deepEqual(outcome.decided, { era: '2025-11-25' }, outcome.why);
  assert.match(outcome.why, /400/);
});

test('a server that answers 401 without a token decides nothing; with the caller\'s authorization it is probed', async () => {
  const b = await start('modern', 'user-token');
  const refused = await probe(b.url);
  assert.equal(refused.decided, undefined);
  assert.match(refused.why, /401/);
  const probed = await probe(b.url, 'Bearer user-token');
  assert.equal(probed.decided?.era, '2026-07-28', probed.why);
  assert.equal(b.seen.at(-1)!.headers.authorization, 'Bearer user-token');
  const legacy = await start('legacy', 'user-token');
  assert.equal((await probe(legacy.url)).decided, undefined);
  assert.equal((await probe(legacy.url, 'Bearer user-token')).decided?.era, '2025-11-25');
});

test('legacy answers: 404 page, 405, -32601 (also on 200 over SSE), a result that is no DiscoverResult, HTML', async () => {
  const legacy: Array<[string, typeof answer]> = [
    ['404 html', (_q, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>')],
    ['405 empty', (_q, res) => res.writeHead(405, { allow: 'GET' }).end()],
    ['400 -32000', json(400, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: No valid session ID provided' } })],
    ['404 -32601', json(404, { jsonrpc: '2.0', id: 'x', error: { code: -32601, message: 'Method not found' } })],
    ['200 sse -32601', (_q, res) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end('event: message\ndata: {"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"Method not found"}}\n\n')],
    ['200 result', json(200, { jsonrpc: '2.0', id: 'x', result: {} })],
    ['200 html', (_q, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>login</html>')],
    ['202 empty', (_q, res) => res.writeHead(202).end()],
    ['200 json garbage', (_q, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{not json')],
  ];
  for (const [name, respond] of legacy) {
    answer = respond;
    const outcome = await probe(cannedUrl);
    assert.deepEqual(outcome.decided, { era: '2025-11-25' }, `${name}: ${outcome.why}`);
  }
});

test('-32022 is read for its supported versions; -32020 and -32021 are modern errors', async () => {
  answer = json(400, { jsonrpc: '2.0', id: 'x', error: { code: -32022, message: 'Unsupported', data: { supported: ['2025-11-25', '2025-06-18'], requested: '2026-07-28' } } });
  assert.deepEqual((await probe(cannedUrl)).decided, { era: '2025-11-25' });
  answer = json(400, { jsonrpc: '2.0', id: 'x', error: { code: -32022, message: 'Unsupported', data: { supported: ['2027-03-01', '2026-07-28'], requested: '2026-07-28' } } });
  assert.deepEqual((await probe(cannedUrl)).decided, { era: '2026-07-28' });
  answer = json(400, { jsonrpc: '2.0', id: 'x', error: { code: -32022, message: 'Unsupported', data: { supported: ['2027-03-01'], requested: '2026-07-28' } } });
  const none = await probe(cannedUrl);
  assert.deepEqual(none.decided, { era: '2025-11-25' });
  assert.match(none.why, /no revision in common/);
  answer = json(400, { jsonrpc: '2.0', id: 'x', error: { code: -32020, message: 'Header mismatch' } });
  assert.deepEqual((await probe(cannedUrl)).decided, { era: '2026-07-28' });
  answer = json(400, { jsonrpc: '2.0', id: 'x', error: { code: -32021, message: 'Missing capability', data: { requiredCapabilities: {} } } });
  assert.deepEqual((await probe(cannedUrl)).decided, { era: '2026-07-28' });
});

test('a DiscoverResult over SSE is read from the first response, without waiting for the stream to end', async () => {
  const result = { resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { prompts: {} } };
  answer = (_q, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': keep-alive\n\nid: 1\ndata: \n\n');
    res.write('data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}\n\n');
    res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: 'switchboard-era-probe', result })}\n\n`);
    // The stream stays open.
  };
  const outcome = await probe(cannedUrl);
  assert.deepEqual(outcome.decided, { era: '2026-07-28', discover: result });
  answer = (_q, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: 'x', result: { supportedVersions: ['2025-11-25'] } }));
  assert.deepEqual((await probe(cannedUrl)).decided, { era: '2025-11-25' });
});

test('401, 403, 408, 429, 5xx, a timeout and a closed port decide nothing', async () => {
  for (const status of [401, 403, 408, 429, 500, 502, 503]) {
    answer = json(status, { jsonrpc: '2.0', id: null, error: { code: -32601, message: 'whatever the body says' } });
    const outcome = await probe(cannedUrl);
    assert.equal(outcome.decided, undefined, `${status}: ${outcome.why}`);
  }
  answer = () => {}; // never answers
  const slow = await probe(cannedUrl, undefined, 300);
  assert.equal(slow.decided, undefined);
  canned.closeAllConnections();
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as { port: number }).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const down = await probe(`http://127.0.0.1:${port}/mcp`);
  assert.equal(down.decided, undefined);
  assert.match(down.why, /probe failed/);
});
