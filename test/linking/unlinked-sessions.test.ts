/**
 * A session whose backend waits for the user's link (issue 12, SPEC §8 "Linking"), at the
 * HTTP level, against a real Redis and the strict protected backend (401 on everything
 * without the provider's token): `initialize` succeeds without the account; `ping`,
 * `logging/setLevel` and notifications are answered by the gateway; the GET stream, DELETE
 * and notifications start no elicitation (no orphan records); a call does, once; a form-only
 * client gets the link as text; another user's session id finds nothing.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const PREFIX = 'unlinked:';
const AUDIENCE = 'https://unlinked.test/mcp';
let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
let gateway: GatewayHandle;

before(async () => {
  [redis, idp, provider] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer()]);
  backend = await startProtectedBackend(provider.issuer);
  const nobodyListens = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    backends: [
      { name: 'strict', url: backend.url, upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', scopes: ['repo'] } },
      { name: 'gone', url: `http://127.0.0.1:${nobodyListens}/mcp`, upstreamAuth: { provider: 'gone', discover: true } },
    ],
    overrides: { redis: { url: redis.url, keyPrefix: PREFIX }, secrets: { cookieKey: 'unlinked-cookie-key-0123456789abcdef01234567', tokenKey: 'unlinked-token-key-0123456789abcdef012345678' }, auth: { issuer: idp.issuer, audience: AUDIENCE, algorithms: ['RS256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } } },
  });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([backend?.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
});

interface Session {
  id: string;
  token: string;
  post(message: unknown): Promise<Response>;
}

async function initialize(sub: string, capabilities: Record<string, unknown>): Promise<{ session: Session; result: Record<string, unknown> }> {
  const token = await idp.token({ sub, aud: AUDIENCE });
  const headers = (id?: string): Record<string, string> => ({
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
    ...(id ? { 'mcp-session-id': id } : {}),
  });
  const res = await fetch(gateway.endpoint('strict'), {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw', version: '1' } } }),
  });
  assert.equal(res.status, 200);
  const id = res.headers.get('mcp-session-id');
  assert.ok(id, 'a session id');
  const body = (await res.json()) as { result: Record<string, unknown> };
  const session: Session = { id, token, post: (message) => fetch(gateway.endpoint('strict'), { method: 'POST', headers: headers(id), body: JSON.stringify(message) }) };
  return { session, result: body.result };
}

async function elicitationKeys(): Promise<string[]> {
  const client = new Redis(redis.url);
  try {
    return await client.keys(`${PREFIX}v:elicitation:*`);
  } finally {
    client.disconnect();
  }
}

test('initialize needs no account; ping, setLevel, notifications, GET and DELETE start no elicitation; a call starts one', { timeout: 60_000 }, async () => {
  const { session, result } = await initialize('dave', { elicitation: { url: {} } });
  assert.equal(result.protocolVersion, '2025-11-25');
  assert.deepEqual((result.capabilities as Record<string, unknown>).tools, { listChanged: true });
  assert.match(String(result.instructions), /acme/);
  assert.equal(await backend.sessionsOpened(), 0);

  assert.equal((await session.post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
  assert.deepEqual(await (await session.post({ jsonrpc: '2.0', id: 2, method: 'ping' })).json(), { jsonrpc: '2.0', id: 2, result: {} });
  assert.deepEqual(await (await session.post({ jsonrpc: '2.0', id: 3, method: 'logging/setLevel', params: { level: 'info' } })).json(), { jsonrpc: '2.0', id: 3, result: {} });

  // The standalone stream is the gateway's own while there is no backend session.
  const controller = new AbortController();
  const stream = await fetch(gateway.endpoint('strict'), {
    headers: { authorization: `Bearer ${session.token}`, accept: 'text/event-stream', 'mcp-session-id': session.id, 'mcp-protocol-version': '2025-11-25' },
    signal: controller.signal,
  });
  assert.equal(stream.status, 200);
  assert.equal(stream.headers.get('content-type'), 'text/event-stream');
  controller.abort();
  assert.deepEqual(await elicitationKeys(), [], 'nothing asked for the account yet');

  const listed = (await (await session.post({ jsonrpc: '2.0', id: 4, method: 'tools/list' })).json()) as { result: { tools: Array<{ name: string; description: string }> } };
  assert.deepEqual(listed.result.tools.map((t) => t.name), ['connect']);
  assert.match(listed.result.tools[0]!.description, /acme/);

  const called = (await (await session.post({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'connect', arguments: {} } })).json()) as { error: { code: number; data: { elicitations: Array<{ url: string }> } } };
  assert.equal(called.error.code, -32042);
  assert.match(called.error.data.elicitations[0]!.url, /\/connect\?elicitationId=/);
  assert.equal((await elicitationKeys()).length, 1);

  const deleted = await fetch(gateway.endpoint('strict'), { method: 'DELETE', headers: { authorization: `Bearer ${session.token}`, 'mcp-session-id': session.id, 'mcp-protocol-version': '2025-11-25' } });
  assert.equal(deleted.status, 204);
  assert.equal((await elicitationKeys()).length, 1, 'DELETE asked for nothing');
  assert.equal((await session.post({ jsonrpc: '2.0', id: 6, method: 'ping' })).status, 404);
  assert.equal(await backend.sessionsOpened(), 0);
});

test('a form-only client gets the link as a tool result; another user cannot use the session', { timeout: 60_000 }, async () => {
  const { session } = await initialize('erin', {});
  const called = (await (await session.post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'whoami', arguments: {} } })).json()) as { result: { isError: boolean; content: Array<{ text: string }> } };
  assert.equal(called.result.isError, true);
  assert.match(called.result.content[0]!.text, /Connect your acme account.*\/connect\?elicitationId=/);

  const frank = await idp.token({ sub: 'frank', aud: AUDIENCE });
  const foreign = await fetch(gateway.endpoint('strict'), {
    method: 'POST',
    headers: { authorization: `Bearer ${frank}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': session.id, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
  });
  assert.equal(foreign.status, 404);
});

test('with discover, a backend that cannot be reached is a backend failure (-32010), not unavailable state (discovery itself is not asked at initialize: test/connect/discovered-link-journey.e2e.test.ts)', { timeout: 60_000 }, async () => {
  const token = await idp.token({ sub: 'gina', aud: AUDIENCE });
  const res = await fetch(gateway.endpoint('gone'), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { id: number; error: { code: number; data: { backend: string } } };
  assert.equal(body.id, 1);
  assert.equal(body.error.code, -32010);
  assert.equal(body.error.data.backend, 'gone');
});
