/**
 * `streams.maxPerUser` (issue 13 §2, "Streams"): one user's idle GET streams cannot lock
 * everyone else out of the standalone stream that carries elicitation-complete and server
 * requests. With room for four streams on the replica and a share of two per user, the
 * third GET of one user gets 429 while another user's GET still opens. Real Redis, real
 * OAuth server, an SDK backend with standalone streams.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let backend: { url: string; stop(): Promise<void> };
let gateway: GatewayHandle;
const open: AbortController[] = [];
/**
 * Every stream's Response stays referenced until the end: undici cancels the body of a fetch
 * Response that is garbage collected unread, which closed a "held" stream under a loaded
 * suite run, freed its place in the share, and let the third GET through (CI, 167b63f).
 */
const held: Response[] = [];

before(async () => {
  [redis, idp, backend] = await Promise.all([startRedis(), startOAuthServer(), startResumableBackend()]);
  gateway = await startGateway({ issuer: idp.issuer, redisUrl: redis.url, backends: [{ name: 'streams', url: backend.url }], overrides: { streams: { maxOpen: 4, maxPerUser: 2 } } });
});

after(async () => {
  for (const controller of open) controller.abort();
  held.length = 0;
  await gateway?.close();
  await Promise.allSettled([backend?.stop(), idp?.stop(), redis?.stop()]);
});

async function sessionOf(token: string): Promise<string> {
  const res = await fetch(gateway.endpoint('streams'), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  assert.equal(res.status, 200);
  await res.body?.cancel();
  return res.headers.get('mcp-session-id')!;
}

/** Opens the session's GET stream and keeps it open (never read); the status it got. */
async function openStream(token: string, sessionId: string): Promise<Response> {
  const controller = new AbortController();
  open.push(controller);
  const res = await fetch(gateway.endpoint('streams'), {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    signal: controller.signal,
  });
  held.push(res);
  return res;
}

test('a user past their share of streams gets 429; another user still gets a stream', { timeout: 60_000 }, async () => {
  const greedy = await idp.token({ sub: 'greedy', aud: gateway.audience });
  const other = await idp.token({ sub: 'other', aud: gateway.audience });
  for (let i = 0; i < 2; i++) assert.equal((await openStream(greedy, await sessionOf(greedy))).status, 200);
  const refused = await openStream(greedy, await sessionOf(greedy));
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('retry-after'), '5');
  assert.equal(((await refused.json()) as { error: { code: number } }).error.code, -32029);
  assert.equal((await openStream(other, await sessionOf(other))).status, 200, 'the other user is not locked out');
});
