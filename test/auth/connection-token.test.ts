/**
 * The bearer header each client connection last proved (auth/authenticate.ts, issue 29): a
 * request whose header is that very string is let in without parsing or looking the token up
 * again. What must hold on one keep-alive connection, whatever it carried before:
 * - each request is the user its own header names (another user's token on the connection
 *   that opened a session does not reach that session; a malformed header is refused);
 * - a token that has expired since the connection proved it is refused;
 * - a token proved for one endpoint opens another only when made out to it.
 *
 * Parts: the gateway in-process, a real OAuth server process, server-everything as the
 * backend, and one undici `Client` (a single connection, counted on the gateway's server).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from 'undici';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

const PROTOCOL = '2025-11-25';
const BACKEND = 'everything';

let idp: OAuthHandle;
let everything: EverythingHandle;
let gateway: GatewayHandle;
/** Connections the gateway accepted. */
let accepted = 0;

before(async () => {
  [idp, everything] = await Promise.all([startOAuthServer(), startEverything()]);
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    backends: [{ name: BACKEND, url: everything.url }],
    // No leeway, so that a token is refused the second its `exp` passes.
    overrides: { auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], clockTolerance: '0s' } },
  });
  gateway.app.server.on('connection', () => accepted++);
});
after(async () => {
  await gateway?.close();
  await Promise.allSettled([idp?.stop(), everything?.stop()]);
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

async function post(client: Client, path: string, authorization: string, body: unknown, session?: string): Promise<Answer> {
  const res = await client.request({
    path,
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      authorization,
      ...(session ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'connection-token-test', version: '1.0.0' } } };
const ping = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' });

async function openSession(client: Client, authorization: string): Promise<string> {
  const res = await post(client, `/mcp/${BACKEND}`, authorization, initialize);
  assert.equal(res.status, 200, res.text);
  const session = res.headers['mcp-session-id'];
  assert.equal(typeof session, 'string');
  await post(client, `/mcp/${BACKEND}`, authorization, { jsonrpc: '2.0', method: 'notifications/initialized' }, session as string);
  return session as string;
}

describe('the bearer header a connection proved', () => {
  test('each request on one connection is the user its own header names', async () => {
    const alice = `Bearer ${await idp.token({ sub: 'alice', aud: gateway.audience })}`;
    const bob = `Bearer ${await idp.token({ sub: 'bob', aud: gateway.audience })}`;
    const client = new Client(gateway.url, { pipelining: 1 });
    const before = accepted;
    try {
      const session = await openSession(client, alice);
      assert.equal((await post(client, `/mcp/${BACKEND}`, alice, ping(2), session)).status, 200, 'alice reaches her session');
      const asBob = await post(client, `/mcp/${BACKEND}`, bob, ping(3), session);
      assert.equal(asBob.status, 404, `bob's token on the same connection does not reach alice's session: ${asBob.text}`);
      const malformed = await post(client, `/mcp/${BACKEND}`, 'Bearer not a token', ping(4), session);
      assert.equal(malformed.status, 401, 'a header that is not a bearer token is refused');
      const forged = await post(client, `/mcp/${BACKEND}`, `${alice}x`, ping(5), session);
      assert.equal(forged.status, 401, 'a header that differs from the proved one by a byte is verified again, and fails');
      assert.equal((await post(client, `/mcp/${BACKEND}`, alice, ping(6), session)).status, 200, 'alice again');
      assert.equal(accepted - before, 1, 'every request went over the one connection');
    } finally {
      await client.close();
    }
  });

  test('a token that expired since the connection proved it is refused', async () => {
    const expiring = `Bearer ${await idp.token({ sub: 'carol', aud: gateway.audience, expiresIn: 2 })}`;
    const client = new Client(gateway.url, { pipelining: 1 });
    const before = accepted;
    try {
      const session = await openSession(client, expiring);
      assert.equal((await post(client, `/mcp/${BACKEND}`, expiring, ping(2), session)).status, 200);
      // `exp` is in whole seconds: past it within at most 3 s.
      await new Promise((resolve) => setTimeout(resolve, 3_100));
      const late = await post(client, `/mcp/${BACKEND}`, expiring, ping(3), session);
      assert.equal(late.status, 401, late.text);
      assert.match(late.text, /expired/);
      assert.equal(accepted - before, 1, 'the refusal came on the connection that had proved the token');
    } finally {
      await client.close();
    }
  });

  test('a token proved on one endpoint opens another only when made out to it', async () => {
    // Made out to /mcp/everything's own resource: not the gateway-wide audience.
    const narrow = `Bearer ${await idp.token({ sub: 'dave', aud: `${gateway.url}/mcp/${BACKEND}` })}`;
    const client = new Client(gateway.url, { pipelining: 1 });
    try {
      await openSession(client, narrow);
      const aggregated = await post(client, '/mcp', narrow, initialize);
      assert.equal(aggregated.status, 401, `the aggregated endpoint is another resource: ${aggregated.text}`);
      assert.match(String(aggregated.headers['www-authenticate']), /invalid_token/);
    } finally {
      await client.close();
    }
  });
});
