/**
 * The in-use marks a replica keeps in the store (src/sessions/session-activity.ts; issue 28
 * §7), on a real MemoryStore: what each kind of use writes, and what eviction under
 * `sessions.maxPerUser` then does. Renewals are called directly (the timer's job), so nothing
 * here waits for a clock.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { SessionActivity } from '../../src/sessions/session-activity.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import type { SessionRecord } from '../../src/state/store.js';

const CAP = 100;
const TTL_MS = 60_000;
const record: SessionRecord = { backend: 'b', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 0 };

function setUp(t: TestContext): { store: MemoryStore; activity: SessionActivity; user: string } {
  const store = new MemoryStore();
  // A renewal interval longer than any test: only explicit renew() calls renew.
  const activity = new SessionActivity(store, { leaseMs: TTL_MS, renewMs: 3_600_000 });
  t.after(() => {
    activity.close();
    return store.close();
  });
  return { store, activity, user: `user-${randomUUID()}` };
}

/** Creates `count` sessions the user leaves behind; returns the ids evicted meanwhile. */
async function abandon(store: MemoryStore, user: string, count: number): Promise<string[]> {
  const evicted: string[] = [];
  for (let n = 0; n < count; n++) for (const gone of await store.createSession(user, `abandoned-${n}`, record, TTL_MS, CAP)) evicted.push(gone.sessionId);
  return evicted;
}

test('an open stream marks its session at once: it survives 150 abandoned sessions', async (t) => {
  const { store, activity, user } = setUp(t);
  await store.createSession(user, 'streaming', record, TTL_MS, CAP);
  const close = activity.begin(user, 'streaming', 'stream');
  const evicted = await abandon(store, user, 150);
  assert.ok(!evicted.includes('streaming'), 'the session with an open stream was evicted');
  assert.deepEqual(evicted, Array.from({ length: 51 }, (_, n) => `abandoned-${n}`));
  close();
});

test('a call is marked only once a renewal finds it in flight (its start writes nothing); then it survives 150 abandoned sessions', async (t) => {
  const { store, activity, user } = setUp(t);
  await store.createSession(user, 'just-started', record, TTL_MS, CAP);
  const firstDone = activity.begin(user, 'just-started', 'call');
  assert.equal((await abandon(store, user, CAP))[0], 'just-started', 'before any renewal the call left no mark: its session went as the least recently used');
  firstDone();

  const other = `user-${randomUUID()}`;
  await store.createSession(other, 'long', record, TTL_MS, CAP);
  const longDone = activity.begin(other, 'long', 'call');
  await activity.renew();
  const evicted = await abandon(store, other, 150);
  assert.ok(!evicted.includes('long'), 'the session of the call in flight at the renewal was evicted');
  assert.equal(evicted.length, 51);
  longDone();
  assert.equal(activity.size, 0, 'nothing in use here any more');
});

test('when the last use ends, the mark is released: the session is idle again', async (t) => {
  const { store, activity, user } = setUp(t);
  await store.createSession(user, 'a', record, TTL_MS, 2);
  const firstStream = activity.begin(user, 'a', 'stream');
  const secondStream = activity.begin(user, 'a', 'stream');
  firstStream();
  firstStream();
  await store.createSession(user, 'b', record, TTL_MS, 2);
  await store.touchSession(user, 'b', TTL_MS);
  assert.deepEqual((await store.createSession(user, 'c', record, TTL_MS, 2)).map((e) => e.sessionId), ['b'], 'a still has a stream open (ending one twice counts once)');
  secondStream();
  await store.touchSession(user, 'c', TTL_MS);
  assert.deepEqual((await store.createSession(user, 'd', record, TTL_MS, 2)).map((e) => e.sessionId), ['a'], 'its last stream closed, a is idle and the least recently used');
});
