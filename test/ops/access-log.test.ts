/**
 * One access-log line per request at the shipped log level (issue 16; SPEC §6): `request
 * completed` with route, backend, JSON-RPC method, status, duration, `sub` and a user digest,
 * and no `incoming request` line; the lines a request writes itself still carry its id and,
 * once authenticated, `sub` and the backend (ops/request-logger.ts). Real gateway, real
 * OAuth server, real MCP backend.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { captureLogLines } from '../helpers/log-lines.js';

let everything: EverythingHandle;
let oauth: OAuthHandle;
let gateway: GatewayHandle;
const { stream: logStream, lines } = captureLogLines();

before(async () => {
  [everything, oauth] = await Promise.all([startEverything(), startOAuthServer()]);
  // `info` is the level the gateway ships with.
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'everything', url: everything.url }], overrides: { log: { level: 'info' } }, logStream });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([everything?.stop(), oauth?.stop()]);
});

type Line = Record<string, unknown> & { reqId?: string; msg?: string };

test('each request writes exactly one access line, with what an operator needs and no token', async () => {
  const token = await oauth.token({ sub: 'access-user', aud: gateway.audience });
  const client = new Client({ name: 'access-log-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(gateway.endpoint('everything'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
  await transport.terminateSession();
  await client.close();
  const refused = await fetch(gateway.endpoint('everything'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(refused.status, 401);

  const records = lines.map((line) => JSON.parse(line) as Line);
  assert.ok(!lines.join('\n').includes(token), 'the token never appears');
  assert.equal(records.filter((r) => r.msg === 'incoming request').length, 0, 'no line when a request arrives');
  const access = records.filter((r) => r.msg === 'request completed');
  const perRequest = new Map<string, number>();
  for (const r of access) perRequest.set(r.reqId!, (perRequest.get(r.reqId!) ?? 0) + 1);
  assert.ok(access.length >= 5, `initialize, initialized, tools/call, DELETE and the refused POST each have a line (got ${access.length})`);
  assert.deepEqual([...perRequest.values()].filter((n) => n !== 1), [], 'one access line per request id');

  const call = access.find((r) => r.rpc === 'tools/call');
  assert.ok(call, 'the tools/call request has its line');
  assert.equal(call.route, '/mcp/:backend');
  assert.equal(call.backend, 'everything');
  assert.equal(call.status, 200);
  assert.equal(typeof call.ms, 'number');
  assert.equal(call.sub, 'access-user');
  assert.equal(call.user, userKeyOf(oauth.issuer, 'access-user').slice(0, 16));
  assert.equal((call.req as { method: string }).method, 'POST');
  // The fields every pino line of the gateway has (the line is written without pino).
  assert.equal(call.level, 30);
  assert.equal(call.service, 'switchboard');
  assert.equal(new Date(call.time as string).toISOString(), call.time);
  const handlerLine = records.find((r) => r.msg === 'session initialized')!;
  assert.deepEqual(Object.keys(call).slice(0, 3), Object.keys(handlerLine).slice(0, 3), 'level, time and service first, as pino writes them');

  const unauthorized = access.find((r) => r.status === 401);
  assert.ok(unauthorized, 'the refused request has its line');
  assert.equal(unauthorized.sub, undefined, 'no caller is named for a request without a valid token');

  const initialized = records.find((r) => r.msg === 'session initialized');
  assert.ok(initialized, "a handler's own line is still written");
  assert.equal(initialized.sub, 'access-user', 'and names the caller');
  assert.equal(initialized.backend, 'everything');
  assert.ok(access.some((r) => r.reqId === initialized.reqId && r.rpc === 'initialize'), 'with the request id of its access line');
});

test('a request that failed after its answer gets its line at error, with the error, through the redacting logger; above info no access line', async () => {
  const { default: Fastify } = await import('fastify');
  const { pino } = await import('pino');
  const { AccessLog } = await import('../../src/ops/access-log.js');
  const { loggerOptions } = await import('../../src/ops/logger.js');
  for (const level of ['info', 'warn']) {
    const { stream, lines: out } = captureLogLines();
    const app = Fastify({ loggerInstance: pino(loggerOptions(level), stream), logController: new AccessLog(stream, level) });
    app.get('/ok', async () => 'fine');
    app.get('/fails', async () => 'answered, then an onResponse hook fails');
    // Fastify hands requestCompleted an error when the response or an onResponse hook failed.
    app.addHook('onResponse', (request, _reply, done) => done(request.url === '/fails' ? new Error('hook broke') : undefined));
    assert.equal((await app.inject({ url: '/ok?access_token=secret' })).statusCode, 200);
    assert.equal((await app.inject({ url: '/fails' })).statusCode, 200);
    await app.close();
    const records = out.map((l) => JSON.parse(l) as Line).filter((r) => r.msg === 'request completed');
    const ok = records.find((r) => r.route === '/ok');
    if (level === 'info') {
      assert.equal(ok?.level, 30);
      assert.equal((ok.req as { url: string }).url, '/ok?access_token=[redacted]');
    } else assert.equal(ok, undefined, `no access line at ${level}`);
    const failed = records.find((r) => r.route === '/fails');
    assert.equal(failed?.level, 50, `the failed request's line at ${level}`);
    assert.equal(failed.status, 200);
    assert.equal((failed.req as { method: string }).method, 'GET');
    assert.equal((failed.err as { message: string }).message, 'hook broke');
  }
});
