/**
 * Coordination between two replicas on one Redis, in-process so that the gateway's own
 * notification API can be called (SPEC §4–5): one standalone GET stream per session across
 * replicas, a gateway notification delivered exactly once to the replica holding the
 * session's stream (and to no other session), a mailbox for a session with no stream open,
 * and a Last-Event-ID resume that takes the stream over from the other replica.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { notifySession } from '../../src/sessions/session-notifier.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';

const AUDIENCE = 'https://switchboard.test/mcp';
let redis: RedisHandle;
let oauth: OAuthHandle;
let backend: { url: string; stop(): Promise<void> };
let a: GatewayHandle;
let b: GatewayHandle;

before(async () => {
  [redis, oauth, backend] = await Promise.all([startRedis(), startOAuthServer(), startResumableBackend()]);
  const replica = () =>
    startGateway({
      issuer: oauth.issuer,
      backends: [{ name: 'resumable', url: backend.url }],
      overrides: { redis: { url: redis.url, keyPrefix: 'coord:' }, auth: { issuer: oauth.issuer, audience: AUDIENCE, algorithms: ['RS256'] }, log: { level: process.env.SB_DEBUG ? 'debug' : 'silent' } },
    });
  [a, b] = await Promise.all([replica(), replica()]);
});

after(async () => {
  await Promise.allSettled([a?.close(), b?.close()]);
  await Promise.allSettled([backend?.stop(), oauth?.stop(), redis?.stop()]);
});

interface Session {
  sub: string;
  token: string;
  id: string;
}

async function session(gateway: GatewayHandle, sub: string): Promise<Session> {
  const token = await oauth.token({ sub, aud: AUDIENCE });
  const res = await fetch(gateway.endpoint('resumable'), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'coord', version: '1' } } }),
  });
  assert.equal(res.status, 200);
  await res.text();
  return { sub, token, id: res.headers.get('mcp-session-id')! };
}

function openGet(gateway: GatewayHandle, s: Session, lastEventId?: string): Promise<Response> {
  return fetch(gateway.endpoint('resumable'), {
    headers: { authorization: `Bearer ${s.token}`, accept: 'text/event-stream', 'mcp-session-id': s.id, 'mcp-protocol-version': '2025-11-25', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  });
}

const note = (n: number) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `note ${n}` } });

describe('two replicas, one Redis', () => {
  test('one standalone stream per session across replicas: the second GET elsewhere gets 409', async () => {
    const s = await session(a, 'exclusive-user');
    const first = await openGet(a, s);
    assert.equal(first.status, 200);
    const reader = new SseReader(first);
    await reader.next(5_000); // priming event: the claim is in place
    const second = await openGet(b, s);
    assert.equal(second.status, 409);
    await second.text();
    await reader.cancel();
  });

  test('a gateway notification reaches the session through the replica holding its stream, exactly once, and no other session', async () => {
    const s = await session(a, 'notified-user');
    const other = await session(a, 'bystander');
    const mine = new SseReader(await openGet(a, s));
    const theirs = new SseReader(await openGet(b, other));
    const priming = await mine.next(5_000);
    assert.equal(priming?.data, '', 'priming event');
    await theirs.next(5_000);

    // Sent from replica B, which does not hold the stream.
    const how = await notifySession(b.app.mcp, userKeyOf(oauth.issuer, s.sub), s.id, note(1));
    assert.equal(how, 'sent');
    const event = await mine.next(5_000);
    assert.deepEqual(messageOf(event!), JSON.parse(note(1)));
    assert.match(event!.id ?? '', /^[0-9a-f]{16}-\d+$/, 'it has an event id, so it can be replayed');
    await assert.rejects(mine.next(1_000), /no SSE event/, 'delivered once');
    await assert.rejects(theirs.next(1_000), /no SSE event/, 'not to another session');
    await mine.cancel();
    await theirs.cancel();
  });

  test('a notification for a session with no stream open waits in its mailbox for the next one', async () => {
    const s = await session(b, 'mailbox-user');
    assert.equal(await notifySession(a.app.mcp, userKeyOf(oauth.issuer, s.sub), s.id, note(2)), 'queued');
    const reader = new SseReader(await openGet(b, s));
    const events = await reader.until((e) => Boolean(e.data), 5_000);
    assert.deepEqual(messageOf(events.at(-1)!), JSON.parse(note(2)));
    await reader.cancel();
  });

  test('a session deleted on one replica is gone on the other at once, though the other had it cached', async () => {
    const s = await session(a, 'deleted-user');
    const headers = { authorization: `Bearer ${s.token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': s.id, 'mcp-protocol-version': '2025-11-25' };
    const ping = (gateway: GatewayHandle) => fetch(gateway.endpoint('resumable'), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
    const cached = await ping(b);
    assert.equal(cached.status, 200, 'B served (and cached) the session');
    await cached.text();
    const deleted = await fetch(a.endpoint('resumable'), { method: 'DELETE', headers });
    assert.equal(deleted.status, 204);
    let status = 0;
    for (let i = 0; i < 20 && status !== 404; i++) {
      status = (await ping(b)).status;
      if (status !== 404) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(status, 404, 'B no longer serves the deleted session');
  });

  test('resuming the standalone stream on the other replica takes it over; later notifications follow it', async () => {
    const s = await session(a, 'moving-user');
    const onA = new SseReader(await openGet(a, s));
    const priming = await onA.next(5_000);
    const userKey = userKeyOf(oauth.issuer, s.sub);
    await notifySession(b.app.mcp, userKey, s.id, note(3));
    const third = await onA.next(5_000);
    assert.deepEqual(messageOf(third!), JSON.parse(note(3)));

    // The client reconnects to B with the id of the priming event: B replays note 3 and holds the stream now.
    const resumed = await openGet(b, s, priming!.id);
    assert.equal(resumed.status, 200);
    const onB = new SseReader(resumed);
    const replayed = await onB.until((e) => Boolean(e.data), 5_000);
    assert.deepEqual(messageOf(replayed.at(-1)!), JSON.parse(note(3)));
    // A let go of the stream (it was told to stop).
    const endOfA = await onA.until(() => false, 5_000);
    assert.ok(endOfA.some((e) => e.retry !== undefined), 'A ended its copy with retry');

    assert.equal(await notifySession(a.app.mcp, userKey, s.id, note(4)), 'sent', 'A now sends to B');
    const fourth = await onB.until((e) => Boolean(e.data), 5_000);
    assert.deepEqual(messageOf(fourth.at(-1)!), JSON.parse(note(4)));
    await onB.cancel();
  });
});
