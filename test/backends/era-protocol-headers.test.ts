/**
 * The 2026-07-28 standard request headers toward a backend (Transports §Standard Request
 * Headers): `BackendCallHeaders.protocolHeaders` reaches a real HTTP server as `Mcp-Method`,
 * `Mcp-Name` and `Mcp-Param-*`, and nothing else in that map does — hop-by-hop hygiene, since
 * the map is built from a client's request.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { StreamableHttpBackend } from '../../src/backends/streamable-http.js';
import { parseConfig } from '../../src/config/load.js';

let server: http.Server;
let url: string;
const seen: http.IncomingHttpHeaders[] = [];

before(async () => {
  server = http.createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`;
});

after(() => new Promise<void>((resolve) => server.close(() => resolve())));

function backend(headers: Record<string, string> = {}): StreamableHttpBackend {
  const config = parseConfig({ publicUrl: 'http://127.0.0.1:1', auth: { issuer: 'https://idp.example.com', audience: 'a' }, backends: [{ name: 'b', url, headers }] });
  return new StreamableHttpBackend(config.backends[0]!);
}

async function send(b: StreamableHttpBackend, protocolHeaders: Record<string, string>, more: { authorization?: string } = {}): Promise<http.IncomingHttpHeaders> {
  const res = await b.post('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', { protocolVersion: '2026-07-28', protocolHeaders, ...more });
  await res.body.dump();
  return seen.at(-1)!;
}

test('Mcp-Method, Mcp-Name and Mcp-Param-* are sent as given, names lower-cased', async () => {
  const b = backend();
  const got = await send(b, { 'Mcp-Method': 'tools/call', 'mcp-name': '=?base64?w6l0w6k=?=', 'Mcp-Param-Region': 'us-west1', 'mcp-param-tenant-id': '42' });
  assert.equal(got['mcp-method'], 'tools/call');
  assert.equal(got['mcp-name'], '=?base64?w6l0w6k=?=');
  assert.equal(got['mcp-param-region'], 'us-west1');
  assert.equal(got['mcp-param-tenant-id'], '42');
  assert.equal(got['mcp-protocol-version'], '2026-07-28');
  await b.close();
});

test('nothing else in the map reaches the backend: no Authorization, cookie, session id or other header', async () => {
  const b = backend();
  const got = await send(b, {
    'mcp-method': 'tools/call',
    authorization: 'Bearer the-clients-own-token',
    cookie: 'sb=1',
    'mcp-session-id': 'gateway-session',
    'mcp-protocol-version': '2025-11-25',
    'mcp-param-': 'no name',
    'mcp-parameter': 'not a param header',
    'x-forwarded-for': '10.0.0.1',
    host: 'evil.example.com',
  });
  assert.equal(got['mcp-method'], 'tools/call');
  for (const name of ['authorization', 'cookie', 'mcp-session-id', 'mcp-param-', 'mcp-parameter', 'x-forwarded-for']) assert.equal(got[name], undefined, name);
  assert.equal(got['mcp-protocol-version'], '2026-07-28', 'the map cannot override the protocol version');
  assert.notEqual(got.host, 'evil.example.com');
  await b.close();
});

test('the call\'s own authorization and static headers are sent beside them as before', async () => {
  const b = backend({ 'X-Team': 'blue' });
  const got = await send(b, { 'mcp-method': 'tools/list' }, { authorization: 'Bearer linked-token' });
  assert.equal(got.authorization, 'Bearer linked-token');
  assert.equal(got['x-team'], 'blue');
  assert.equal(got['mcp-method'], 'tools/list');
  const none = await send(b, {});
  assert.equal(none['mcp-method'], undefined);
  await b.close();
});
