/**
 * Logs (SPEC §6): pino JSON lines carrying the request id, and `sub` and backend once the
 * caller is known; the client's token, cookies and query values never appear, even at
 * trace level.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
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
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'everything', url: everything.url }], overrides: { log: { level: 'trace' } }, logStream });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([everything?.stop(), oauth?.stop()]);
});

test('JSON lines with request id, sub and backend; no token, cookie or query value anywhere', async () => {
  const token = await oauth.token({ sub: 'logged-user', aud: gateway.audience });
  const client = new Client({ name: 'log-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(gateway.endpoint('everything'), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, Cookie: 'sb_session=cookie-secret-value' } },
  });
  await client.connect(transport);
  await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
  await transport.terminateSession();
  await client.close();
  // A token wrongly put in the query string is refused, and not logged either.
  const refused = await fetch(`${gateway.endpoint('everything').href}?access_token=${token}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(refused.status, 401);
  // A bad token is not logged either.
  await fetch(gateway.endpoint('everything'), { method: 'POST', headers: { authorization: 'Bearer not-a-real-token-abc123', 'content-type': 'application/json' }, body: '{}' });

  assert.ok(lines.length > 5, 'something was logged');
  const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  const all = lines.join('\n');
  assert.ok(!all.includes(token), 'the bearer token never appears');
  assert.ok(!all.includes(token.split('.')[2]!), 'not even its signature');
  assert.ok(!all.includes('cookie-secret-value'), 'cookies never appear');
  assert.ok(!all.includes('not-a-real-token-abc123'), 'bad tokens never appear');

  const requestLines = records.filter((r) => r.reqId !== undefined);
  assert.ok(requestLines.length > 0);
  const initialized = records.find((r) => r.msg === 'session initialized');
  assert.ok(initialized, 'session initialization is logged');
  assert.equal(initialized.sub, 'logged-user');
  assert.equal(initialized.backend, 'everything');
  assert.ok(typeof initialized.reqId === 'string');
  // Every line logged after authentication for a request carries the sub.
  const authenticatedIds = new Set(records.filter((r) => r.sub === 'logged-user').map((r) => r.reqId));
  for (const r of records) if (authenticatedIds.has(r.reqId) && r.msg === 'request completed') assert.equal(r.sub, 'logged-user');
  const queryLine = records.find((r) => typeof (r.req as { url?: string } | undefined)?.url === 'string' && (r.req as { url: string }).url.includes('access_token'));
  assert.ok(queryLine, 'the refused request is logged');
  assert.match((queryLine.req as { url: string }).url, /access_token=\[redacted\]/);
});
