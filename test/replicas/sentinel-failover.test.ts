/**
 * A Redis failover under two gateway replicas (issue 17; SPEC §8 `redis.mode: sentinel`):
 * real processes only — one master, one replica and three sentinels (test/helpers/
 * redis-sentinel.ts), two gateways, the resumable fixture backend, the OAuth server.
 *
 * Mid-session, with a tool call waiting for the user's answer to an elicitation and its
 * stream dropped by the client, the master is killed (SIGKILL). Until the sentinels have
 * promoted the replica and the gateways have found it, requests that need Redis wait for it
 * (`redis.unavailableWait`, 5 s by default; issue 45 §1) — a 503 with Retry-After only for
 * one that waited past that bound, never a hang — and /readyz says at once what it waits
 * for; afterwards everything succeeds: the session is still there, the stream resumes with
 * Last-Event-ID on the other replica, and the answer to the pending elicitation reaches the
 * backend, whose result arrives on the resumed stream.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { commandOnce } from '../helpers/redis-processes.js';
import { startRedisSentinel, type RedisSentinelHandle } from '../helpers/redis-sentinel.js';
import { startReplicas, storeWaits, type ReplicaSet } from '../helpers/replicas.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';
import { messageOf, SseReader, type SseEvent } from '../helpers/sse-client.js';

let sentinel: RedisSentinelHandle;
let oauth: OAuthHandle;
let backend: { url: string; stop(): Promise<void> };
let set: ReplicaSet;

/** Every request in the failover window must settle within this (a hang fails the test). */
const REQUEST_BOUND_MS = 12_000;
/** `redis.unavailableWait` (its default): a 503 only after a request waited this long. */
const UNAVAILABLE_WAIT_MS = 5_000;
/** The whole window, kill to first success, on a quiet machine about 3 s. */
const WINDOW_BOUND_MS = 30_000;

before(async () => {
  [sentinel, oauth, backend] = await Promise.all([startRedisSentinel(), startOAuthServer(), startResumableBackend()]);
  set = await startReplicas({
    count: 2,
    redis: { mode: 'sentinel', sentinels: sentinel.sentinels, name: sentinel.name },
    issuer: oauth.issuer,
    backends: [{ name: 'resumable', url: backend.url }],
  });
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.stop(), oauth?.stop(), sentinel?.stop()]);
});

interface Session {
  token: string;
  id: string;
}

const headers = (s: Session, extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${s.token}`,
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  'mcp-session-id': s.id,
  'mcp-protocol-version': '2025-11-25',
  ...extra,
});

async function openSession(): Promise<Session> {
  const token = await oauth.token({ sub: 'failover-user', aud: set.audience });
  const init = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: { form: {} } }, clientInfo: { name: 'raw', version: '1' } } };
  const res = await fetch(set.endpoint(0, 'resumable'), { method: 'POST', headers: { ...headers({ token, id: '' }), 'mcp-session-id': '' }, body: JSON.stringify(init) });
  assert.equal(res.status, 200, await res.clone().text());
  await res.text();
  const session = { token, id: res.headers.get('mcp-session-id')! };
  const initialized = await fetch(set.endpoint(1, 'resumable'), { method: 'POST', headers: headers(session), body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  assert.equal(initialized.status, 202);
  return session;
}

interface Outcome {
  what: string;
  status: number | 'hung';
  retryAfter?: string | null;
  at?: number;
  /** How long the request took. */
  ms: number;
}

/** A bounded POST on `replica`: its status and Retry-After, or 'hung'. */
async function post(what: string, replica: number, head: Record<string, string>, body: unknown): Promise<Outcome> {
  const started = Date.now();
  try {
    const res = await fetch(set.endpoint(replica, 'resumable'), { method: 'POST', headers: head, body: JSON.stringify(body), signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
    await res.text();
    return { what, status: res.status, retryAfter: res.headers.get('retry-after'), ms: Date.now() - started };
  } catch {
    return { what, status: 'hung', ms: Date.now() - started };
  }
}

/** tools/list in the session (a replica may answer it from its session cache). */
const listTools = (session: Session, replica: number, id: number) => post('tools/list', replica, headers(session), { jsonrpc: '2.0', id, method: 'tools/list' });

/** A new session: always written to Redis. */
const initialize = (session: Session, replica: number) =>
  post('initialize', replica, { ...headers(session), 'mcp-session-id': '' }, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } });

const isElicitation = (e: SseEvent) => messageOf(e)?.method === 'elicitation/create';

test('the master is killed mid-session: requests wait out the failover (503 with Retry-After only past redis.unavailableWait); then the session, its stream (Last-Event-ID) and a pending elicitation go on', async (t) => {
  const session = await openSession();

  // A call that reports progress, then waits for the user: read up to the elicitation, drop the stream.
  const controller = new AbortController();
  const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'ask', arguments: { steps: 3 }, _meta: { progressToken: 'p7' } } };
  const res = await fetch(set.endpoint(0, 'resumable'), { method: 'POST', headers: headers(session), body: JSON.stringify(call), signal: controller.signal });
  assert.equal(res.status, 200);
  const seen = await new SseReader(res).until(isElicitation, 15_000);
  controller.abort();
  const firstProgress = seen.find((e) => messageOf(e)?.method === 'notifications/progress')!;
  assert.ok(firstProgress?.id, 'progress events carry SSE ids');

  // What the gateways wrote is on the replica before the master goes (async replication: a
  // write acknowledged after this point could be lost with the master, by Redis' design).
  assert.equal(await commandOnce(sentinel.master.port, 'WAIT', '1', '5000'), 1, 'the replica acknowledged every write');
  await sentinel.master.kill();
  const killedAt = Date.now();

  // The failover window: requests alternate between the replicas until both have succeeded
  // after the sentinels promoted the replica. Inside it a request succeeds — at once from a
  // replica's session cache, or after waiting for Redis — or, only when it waited past
  // `redis.unavailableWait`, gets 503; never hangs. /readyz does not wait: polled meanwhile,
  // it says the store is away.
  const outcomes: Outcome[] = [];
  const readiness: Array<{ status: number; reason?: string }> = [];
  let polling = true;
  const poller = (async () => {
    for (let n = 0; polling; n++) {
      const ready = await fetch(`${set.replicas[n % 2]!.url}/readyz`, { signal: AbortSignal.timeout(REQUEST_BOUND_MS) }).then(async (r) => ({ ...((await r.json()) as { reason?: string }), status: r.status }));
      readiness.push(ready);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  let promotedAt: number | undefined;
  const recovered = new Set<number>();
  for (let n = 0; Date.now() - killedAt < WINDOW_BOUND_MS; n++) {
    const round = [await listTools(session, n % 2, 100 + n), await initialize(session, n % 2)].map((o) => ({ ...o, at: Date.now() - killedAt }));
    outcomes.push(...round);
    if (promotedAt !== undefined && round.every((o) => o.status === 200)) recovered.add(n % 2);
    if (recovered.size === 2) break;
    if (promotedAt === undefined && (await sentinel.masterPort().catch(() => 0)) === sentinel.replica.port) promotedAt = Date.now() - killedAt;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  polling = false;
  await poller;
  const windowMs = outcomes.at(-1)!.at;
  const masterNow = await sentinel.masterPort().catch(() => 0);
  const story = `promoted at ${promotedAt} ms (sentinels name :${masterNow}, the replica was :${sentinel.replica.port}); last /readyz ${JSON.stringify(readiness.at(-1))}; last outcomes ${JSON.stringify(outcomes.slice(-6))}`;
  assert.ok(recovered.size === 2, `promoted, then requests succeeded on both replicas, within ${WINDOW_BOUND_MS} ms of the kill: ${story}`);
  for (const o of outcomes) {
    assert.notEqual(o.status, 'hung', `no request hung (${REQUEST_BOUND_MS} ms) during the failover: ${JSON.stringify(outcomes)}`);
    assert.ok(o.status === 200 || (o.status === 503 && o.retryAfter === '2'), `inside the window: 200, or 503 with Retry-After: ${JSON.stringify(outcomes)}`);
    if (o.status === 503) assert.ok(o.ms >= UNAVAILABLE_WAIT_MS - 100, `a 503 only after waiting redis.unavailableWait (${UNAVAILABLE_WAIT_MS} ms): ${JSON.stringify(outcomes)}`);
  }
  const waits = await storeWaits(set.replicas);
  assert.ok((waits.served ?? 0) > 0, `requests waited for the failover and were served: ${JSON.stringify(waits)}`);
  assert.ok(readiness.some((r) => r.status === 503 && /redis sentinel, connection \w+/.test(r.reason ?? '')), `/readyz reported the store unavailable and why: ${JSON.stringify(readiness)}`);

  // After the window: no more errors, on either replica.
  for (let n = 0; n < 4; n++) {
    assert.equal((await listTools(session, n % 2, 200 + n)).status, 200, 'the session goes on after the window');
    assert.equal((await initialize(session, n % 2)).status, 200, 'new sessions open after the window');
  }
  for (const r of set.replicas) assert.equal((await fetch(`${r.url}/readyz`)).status, 200);

  // The stream resumes on the other replica from the first progress event: the rest of the
  // progress and the elicitation replayed; the answer goes to the backend; the result follows.
  const resumed = await fetch(set.endpoint(1, 'resumable'), { headers: headers(session, { accept: 'text/event-stream', 'last-event-id': firstProgress.id! }) });
  assert.equal(resumed.status, 200);
  const reader = new SseReader(resumed);
  const replayed = await reader.until(isElicitation, 15_000);
  const progress = replayed.map(messageOf).filter((m) => m?.method === 'notifications/progress').map((m) => (m!.params as { progress: number }).progress);
  assert.deepEqual(progress, [2, 3], 'the progress after Last-Event-ID, once each');
  const elicitation = messageOf(replayed.at(-1)!)!;
  const answer = await fetch(set.endpoint(0, 'resumable'), { method: 'POST', headers: headers(session), body: JSON.stringify({ jsonrpc: '2.0', id: elicitation.id, result: { action: 'accept', content: { colour: 'teal' } } }) });
  assert.equal(answer.status, 202, await answer.text());
  const rest = await reader.until((e) => messageOf(e)?.id === 7, 15_000);
  assert.match(JSON.stringify(messageOf(rest.at(-1)!)?.result), /answered accept teal/);
  t.diagnostic(`failover: promoted after ${promotedAt} ms, both replicas served again at ${windowMs} ms; ${outcomes.filter((o) => o.status === 503).length} of ${outcomes.length} requests got 503, the longest took ${Math.max(...outcomes.map((o) => o.ms))} ms; store waits ${JSON.stringify(waits)}`);
});
