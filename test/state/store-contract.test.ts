/**
 * The state contract (SPEC §5): ONE suite, `storeContract`, run against the in-memory store
 * and against the Redis store on a real redis-server. Whatever the gateway may rely on is
 * asserted here, so the two implementations cannot drift apart.
 *
 * Plus Redis-only behaviour: an outage makes operations fail promptly (never hang), and the
 * same store object recovers by itself once Redis is back.
 *
 * Timing: TTLs are short (hundreds of ms) and every wait is bounded. Where a test must see
 * something happen "eventually" (expiry) it polls with a deadline instead of sleeping a
 * fixed, tight amount.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test, type TestContext } from 'node:test';
import { MemoryStore } from '../../src/state/memory-store.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { ReplayBudget, SessionRecord, StateStore, StoredEvent, StreamKey } from '../../src/state/store.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { commandOnce } from '../helpers/redis-processes.js';

/**
 * The TTL of the tests that keep something alive by touching it every 200–250 ms. At 600 ms a
 * touch that came 400 ms late found the session gone: a Redis Cluster run at three files side
 * by side, the machine 97 % busy (CI of ff5b6ab). 1.2 s leaves each touch almost a second of
 * slack and still shows the life extended well past one TTL.
 */
const SLIDING_TTL_MS = 1_200;

/** Creates a fresh, empty store (or a fresh view on a shared server under a unique prefix). */
type StoreFactory = (replayBudget?: ReplayBudget) => Promise<StateStore>;

const LIMITS = { maxEvents: 100, ttlMs: 60_000 };

function sessionRecord(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return {
    backend: 'github',
    backendSessionId: 'backend-session-1',
    protocolVersion: '2025-11-25',
    clientCapabilities: { elicitation: { url: {}, form: {} }, roots: { listChanged: true } },
    createdAt: 1_700_000_000_123,
    ...overrides,
  };
}

function streamKey(overrides: Partial<StreamKey> = {}): StreamKey {
  return { userKey: `u-${randomUUID()}`, sessionId: `s-${randomUUID()}`, streamId: `st-${randomUUID()}`, ...overrides };
}

const dataEvent = (seq: number): StoredEvent => ({ seq, data: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { n: seq } }) });

/** Polls until `check` returns true, at most `timeoutMs`. */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  await waitUntil(async () => ((await check()) ? true : undefined), { what, timeoutMs, intervalMs: 25 });
}

/** The contract every StateStore implementation must meet. */
function storeContract(name: string, kind: StateStore['kind'], factory: StoreFactory): void {
  describe(`StateStore contract: ${name}`, () => {
    async function open(t: TestContext, replayBudget?: ReplayBudget): Promise<StateStore> {
      const store = await factory(replayBudget);
      t.after(() => store.close());
      return store;
    }

    describe('sessions', () => {
      test('create, touch and delete', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const record = sessionRecord();
        assert.equal(await store.touchSession(user, 'sess-1', 10_000), undefined, 'unknown session is not found');

        await store.createSession(user, 'sess-1', record, 10_000);
        assert.deepEqual(await store.touchSession(user, 'sess-1', 10_000), record);
        assert.deepEqual(await store.touchSession(user, 'sess-1', 10_000), record, 'touch does not consume the session');

        assert.equal(await store.deleteSession(user, 'sess-1'), true, 'deleting an existing session reports true');
        assert.equal(await store.touchSession(user, 'sess-1', 10_000), undefined, 'deleted session is gone');
        assert.equal(await store.deleteSession(user, 'sess-1'), false, 'deleting again reports false');
        assert.equal(await store.deleteSession(user, 'never-existed'), false, 'deleting an unknown session reports false');
      });

      test('createSession on an existing id replaces the record', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        await store.createSession(user, 'sess', sessionRecord({ backend: 'a' }), 10_000);
        await store.createSession(user, 'sess', sessionRecord({ backend: 'b' }), 10_000);
        assert.equal((await store.touchSession(user, 'sess', 10_000))?.backend, 'b');
      });

      test('replaceSession replaces a live record only: an ended session stays ended', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        assert.equal(await store.replaceSession(user, 'sess', sessionRecord({ backend: 'a' }), 10_000), false, 'no session, nothing replaced');
        assert.equal(await store.touchSession(user, 'sess', 10_000), undefined, 'and none created');
        await store.createSession(user, 'sess', sessionRecord({ backend: 'a' }), 10_000);
        assert.equal(await store.replaceSession(user, 'sess', sessionRecord({ backend: 'b' }), 10_000), true);
        assert.equal((await store.touchSession(user, 'sess', 10_000))?.backend, 'b');
        await store.deleteSession(user, 'sess');
        assert.equal(await store.replaceSession(user, 'sess', sessionRecord({ backend: 'c' }), 10_000), false);
        assert.equal(await store.touchSession(user, 'sess', 10_000), undefined, 'a replace after DELETE does not bring the session back');
      });

      test('sessions are keyed by user: the same id under another userKey is not found', async (t) => {
        const store = await open(t);
        const alice = `alice-${randomUUID()}`;
        const bob = `bob-${randomUUID()}`;
        await store.createSession(alice, 'shared-id', sessionRecord({ backend: 'alice-backend' }), 10_000);

        assert.equal(await store.touchSession(bob, 'shared-id', 10_000), undefined, "bob cannot see alice's session");
        assert.equal(await store.deleteSession(bob, 'shared-id'), false, "bob cannot delete alice's session");
        assert.equal((await store.touchSession(alice, 'shared-id', 10_000))?.backend, 'alice-backend', "alice's session survived bob's attempts");

        // Both users may hold the same session id independently.
        await store.createSession(bob, 'shared-id', sessionRecord({ backend: 'bob-backend' }), 10_000);
        assert.equal((await store.touchSession(alice, 'shared-id', 10_000))?.backend, 'alice-backend');
        assert.equal((await store.touchSession(bob, 'shared-id', 10_000))?.backend, 'bob-backend');
        assert.equal(await store.deleteSession(bob, 'shared-id'), true);
        assert.equal((await store.touchSession(alice, 'shared-id', 10_000))?.backend, 'alice-backend', "deleting bob's did not delete alice's");
      });

      test('a session expires after its idle TTL', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        await store.createSession(user, 'short', sessionRecord(), 300);
        await store.createSession(user, 'long', sessionRecord(), 60_000);
        // "Gone" checks sleep past the TTL and look once: looking earlier would slide the TTL.
        await sleep(700);
        assert.equal(await store.touchSession(user, 'short', 300), undefined, 'the session outlived its 300 ms TTL');
        assert.equal(await store.deleteSession(user, 'short'), false, 'an expired session does not count as existing');
        assert.notEqual(await store.touchSession(user, 'long', 60_000), undefined, 'a session with a long TTL is unaffected');
      });

      test('touch sets the idle TTL (it can also shorten it)', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        await store.createSession(user, 'sess', sessionRecord(), 60_000);
        assert.notEqual(await store.touchSession(user, 'sess', 300), undefined);
        await sleep(700);
        assert.equal(await store.touchSession(user, 'sess', 60_000), undefined, 'touch with 300 ms replaced the 60 s TTL');
      });

      test('touch slides the idle TTL', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const ttl = SLIDING_TTL_MS;
        const start = Date.now();
        await store.createSession(user, 'sliding', sessionRecord(), ttl);
        // Touch every ~250 ms for well over twice the TTL: each touch must extend its life.
        let touches = 0;
        while (Date.now() - start < ttl * 2.5) {
          await sleep(250);
          const found = await store.touchSession(user, 'sliding', ttl);
          assert.notEqual(found, undefined, `session lost after ${Date.now() - start} ms although touched every 250 ms (ttl ${ttl} ms)`);
          touches += 1;
        }
        assert.ok(touches >= 5);
        assert.ok(Date.now() - start > ttl * 2, 'the session outlived its original TTL');
        // Left alone, it expires.
        await sleep(ttl + 400);
        assert.equal(await store.touchSession(user, 'sliding', ttl), undefined, 'the untouched session expired');
      });
    });

    describe('sessions per user (sessions.maxPerUser)', () => {
      test('past the cap the least recently used sessions are deleted in the same step and returned with their records', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const other = `other-${randomUUID()}`;
        await store.createSession(other, 'theirs', sessionRecord({ backend: 'theirs' }), 10_000, 2);
        for (const n of [1, 2, 3]) assert.deepEqual(await store.createSession(user, `s${n}`, sessionRecord({ backend: `b${n}` }), 10_000, 3), [], `session ${n} fits`);
        const evicted = await store.createSession(user, 's4', sessionRecord({ backend: 'b4' }), 10_000, 3);
        assert.deepEqual(evicted, [{ sessionId: 's1', record: sessionRecord({ backend: 'b1' }) }]);
        assert.equal(await store.touchSession(user, 's1', 10_000), undefined, 'the evicted session is gone');
        for (const n of [2, 3, 4]) assert.equal((await store.touchSession(user, `s${n}`, 10_000))?.backend, `b${n}`);
        assert.equal((await store.touchSession(other, 'theirs', 10_000))?.backend, 'theirs', "another user's session is not counted");

        // A lower cap (configuration changed) evicts as many as needed, least recently used first.
        const more = await store.createSession(user, 's5', sessionRecord({ backend: 'b5' }), 10_000, 2);
        assert.deepEqual(more.map((e) => e.sessionId), ['s2', 's3']);
        assert.equal(await store.countSessions(), 3, 'theirs, s4 and s5');
      });

      test('deleted, expired and re-created sessions count once or not at all; without a cap nothing is evicted', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        await store.createSession(user, 'a', sessionRecord(), 10_000, 2);
        await store.createSession(user, 'a', sessionRecord({ backend: 'again' }), 10_000, 2);
        await store.createSession(user, 'b', sessionRecord(), 10_000, 2);
        assert.equal((await store.touchSession(user, 'a', 10_000))?.backend, 'again', 'creating an id again counts it once');
        await store.deleteSession(user, 'b');
        assert.deepEqual(await store.createSession(user, 'c', sessionRecord(), 10_000, 2), [], 'a deleted session does not count');
        await store.createSession(user, 'short', sessionRecord(), 200);
        await sleep(500);
        assert.deepEqual(await store.createSession(user, 'd', sessionRecord(), 10_000, 3), [], 'an expired session neither counts nor is returned');
        assert.deepEqual((await store.createSession(user, 'e', sessionRecord(), 10_000, 3)).map((e) => e.sessionId), ['a']);
        for (let n = 0; n < 5; n++) assert.deepEqual(await store.createSession(user, `free-${n}`, sessionRecord(), 10_000), []);
      });

      test('the index lives as long as its sessions: a session kept alive by touches still counts', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const ttl = SLIDING_TTL_MS;
        await store.createSession(user, 'kept', sessionRecord(), ttl, 2);
        const start = Date.now();
        while (Date.now() - start < ttl * 2) {
          await sleep(200);
          assert.notEqual(await store.touchSession(user, 'kept', ttl), undefined);
        }
        await store.createSession(user, 'second', sessionRecord(), ttl, 2);
        assert.deepEqual((await store.createSession(user, 'third', sessionRecord(), ttl, 2)).map((e) => e.sessionId), ['kept']);
      });
    });

    describe('eviction order (issue 28 §7): least recently used first, sessions in use last', () => {
      const CAP = 100;
      const LEASE_MS = 60_000;

      test('a session kept in use survives 150 abandoned sessions of the same user', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        await store.createSession(user, 'in-use', sessionRecord({ backend: 'in-use' }), 60_000, CAP);
        await store.markSessionsInUse(user, ['in-use'], LEASE_MS);
        const abandoned = Array.from({ length: 150 }, (_, n) => `abandoned-${String(n).padStart(3, '0')}`);
        const evicted: string[] = [];
        for (const id of abandoned) {
          for (const gone of await store.createSession(user, id, sessionRecord(), 60_000, CAP)) evicted.push(gone.sessionId);
        }
        assert.equal((await store.touchSession(user, 'in-use', 60_000))?.backend, 'in-use', 'the session in use is still there');
        assert.deepEqual(evicted, abandoned.slice(0, 51), 'the 51 abandoned sessions used least recently went, in that order');
        for (const id of abandoned.slice(51)) assert.notEqual(await store.touchSession(user, id, 60_000), undefined, `${id} is kept`);
      });

      test('a session kept busy by use survives 150 abandoned sessions of the same user', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        await store.createSession(user, 'used', sessionRecord({ backend: 'used' }), 60_000, CAP);
        const evicted: string[] = [];
        for (let n = 0; n < 150; n++) {
          for (const gone of await store.createSession(user, `abandoned-${n}`, sessionRecord(), 60_000, CAP)) evicted.push(gone.sessionId);
          if (n % 10 === 9) assert.notEqual(await store.touchSession(user, 'used', 60_000), undefined, `used after ${n + 1} abandoned sessions`);
        }
        assert.equal(evicted.length, 51);
        assert.ok(!evicted.includes('used'), `the session in use was evicted: ${evicted.join(', ')}`);
        assert.deepEqual(evicted, Array.from({ length: 51 }, (_, n) => `abandoned-${n}`));
      });

      test('idle sessions go least recently used first; sessions in use only after every idle one; never the new one', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const ids = (evicted: { sessionId: string }[]) => evicted.map((e) => e.sessionId);
        for (const id of ['a', 'b', 'c']) await store.createSession(user, id, sessionRecord(), 60_000, 3);
        await store.touchSession(user, 'a', 60_000);
        assert.deepEqual(ids(await store.createSession(user, 'd', sessionRecord(), 60_000, 3)), ['b'], 'a touch counts as a use: b is the least recently used');
        await store.markSessionsInUse(user, ['c'], LEASE_MS);
        await store.touchSession(user, 'a', 60_000);
        await store.touchSession(user, 'd', 60_000);
        assert.deepEqual(ids(await store.createSession(user, 'e', sessionRecord(), 60_000, 3)), ['a'], 'c is used least recently but in use: the idle a goes');
        assert.deepEqual(ids(await store.createSession(user, 'f', sessionRecord(), 60_000, 2)), ['d', 'e'], 'every idle session goes before the one in use');
        assert.deepEqual(ids(await store.createSession(user, 'g', sessionRecord(), 60_000, 1)), ['f', 'c'], 'with no idle session left, the one in use goes; the new one stays');
        assert.notEqual(await store.touchSession(user, 'g', 60_000), undefined);
      });

      test('a release ends the mark at once, a mark lapses after its lease; unknown sessions are not marked', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const ids = (evicted: { sessionId: string }[]) => evicted.map((e) => e.sessionId);
        await store.markSessionsInUse(user, ['ghost'], LEASE_MS);
        assert.equal(await store.touchSession(user, 'ghost', 60_000), undefined, 'marking does not create a session');
        await store.createSession(user, 'x', sessionRecord(), 60_000, 2);
        assert.deepEqual(await store.createSession(user, 'y', sessionRecord(), 60_000, 2), [], 'the mark of an unknown session does not count against the cap');

        await store.markSessionsInUse(user, ['x'], LEASE_MS);
        await store.releaseSessionInUse(user, 'x');
        await store.touchSession(user, 'y', 60_000);
        assert.deepEqual(ids(await store.createSession(user, 'z', sessionRecord(), 60_000, 2)), ['x'], 'released, x is idle again and the least recently used');

        await store.markSessionsInUse(user, ['y'], 300);
        await store.touchSession(user, 'z', 60_000);
        await sleep(700);
        await store.touchSession(user, 'z', 60_000);
        assert.deepEqual(ids(await store.createSession(user, 'w', sessionRecord(), 60_000, 2)), ['y'], 'past its 300 ms lease y counts as idle again');
      });

      test('a deleted session takes its mark along: created again, it starts idle', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const ids = (evicted: { sessionId: string }[]) => evicted.map((e) => e.sessionId);
        await store.createSession(user, 'p', sessionRecord(), 60_000, 2);
        await store.markSessionsInUse(user, ['p'], LEASE_MS);
        await store.deleteSession(user, 'p');
        await store.createSession(user, 'p', sessionRecord(), 60_000, 2);
        await store.createSession(user, 'q', sessionRecord(), 60_000, 2);
        assert.deepEqual(ids(await store.createSession(user, 'r', sessionRecord(), 60_000, 2)), ['p']);
      });
    });

    describe('replay log budgets (streams.replayBytes, streams.replayBytesPerUser)', () => {
      const sized = (seq: number, bytes: number): StoredEvent => {
        const event = { seq, data: '' };
        event.data = 'x'.repeat(bytes - size(event));
        return event;
      };
      const size = (e: StoredEvent) => Buffer.byteLength(JSON.stringify(e));
      const total = (events: StoredEvent[]) => events.reduce((n, e) => n + size(e), 0);
      const meta: StoredEvent = { seq: 0, meta: { kind: 'post', requestIds: [1] } };

      test('a log keeps at most maxBytes: the oldest entries go, its meta entry and newest entry stay', async (t) => {
        const store = await open(t, { maxBytes: 1_000, maxBytesPerUser: 100_000 });
        const key = streamKey();
        await store.appendEvents(key, [meta], LIMITS);
        for (let seq = 1; seq <= 20; seq++) await store.appendEvents(key, [sized(seq, 100)], LIMITS);
        const kept = await store.readEvents(key);
        assert.deepEqual(kept[0], meta, 'the meta entry stays first');
        assert.ok(total(kept) <= 1_000, `${total(kept)} bytes kept`);
        assert.deepEqual(kept.slice(1).map((e) => e.seq), [12, 13, 14, 15, 16, 17, 18, 19, 20], 'the newest entries, in order');

        // An entry larger than the whole budget is not kept once something follows it.
        const big = streamKey();
        await store.appendEvents(big, [meta, sized(1, 5_000), { seq: 2, end: true }], LIMITS);
        assert.deepEqual((await store.readEvents(big)).map((e) => e.seq), [0, 2]);
        const newest = streamKey();
        await store.appendEvents(newest, [meta, sized(1, 5_000)], LIMITS);
        assert.deepEqual((await store.readEvents(newest)).map((e) => e.seq), [0, 1], 'the newest entry stays whatever its size');
      });

      test('maxEvents counts events besides the meta entry, which stays', async (t) => {
        const store = await open(t);
        const key = streamKey();
        await store.appendEvents(key, [meta], { maxEvents: 5, ttlMs: 60_000 });
        for (let seq = 1; seq <= 8; seq++) await store.appendEvents(key, [dataEvent(seq)], { maxEvents: 5, ttlMs: 60_000 });
        assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 4, 5, 6, 7, 8]);
        await store.appendEvents(key, Array.from({ length: 12 }, (_, i) => dataEvent(100 + i)), { maxEvents: 5, ttlMs: 60_000 });
        assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 107, 108, 109, 110, 111]);
      });

      test("past a user's budget their least recently appended logs are dropped whole; other users are untouched", async (t) => {
        const store = await open(t, { maxBytes: 2_000, maxBytesPerUser: 3_000 });
        const user = `u-${randomUUID()}`;
        const own = (streamId: string) => streamKey({ userKey: user, sessionId: 'sess', streamId });
        const [a, b, c] = [own('a'), own('b'), own('c')];
        const stranger = streamKey();
        await store.appendEvents(stranger, [sized(1, 1_900)], LIMITS);
        await store.appendEvents(a, [sized(1, 1_200)], LIMITS);
        await store.appendEvents(b, [sized(1, 1_200)], LIMITS);
        await store.appendEvents(a, [sized(2, 100)], LIMITS);
        await store.appendEvents(c, [sized(1, 1_200)], LIMITS);
        assert.deepEqual(await store.readEvents(b), [], 'b, appended least recently, went whole');
        assert.deepEqual((await store.readEvents(a)).map((e) => e.seq), [1, 2]);
        assert.deepEqual((await store.readEvents(c)).map((e) => e.seq), [1]);
        assert.deepEqual((await store.readEvents(stranger)).map((e) => e.seq), [1], "another user's log is not theirs to pay for");

        // 20 answers of 2 000 bytes, each on its own stream (issue 13): the user keeps 3 000 bytes.
        const many = Array.from({ length: 20 }, (_, i) => own(`call-${i}`));
        for (const key of many) await store.appendEvents(key, [meta, sized(1, 1_000), { seq: 2, end: true }], LIMITS);
        let kept = 0;
        for (const key of [a, b, c, ...many]) kept += total(await store.readEvents(key));
        assert.ok(kept <= 3_000, `${kept} bytes kept for the user`);
        assert.equal((await store.readEvents(many.at(-1)!)).length, 3, 'the newest call is whole');
      });

      test('a log that expired and starts again does not count its old bytes', async (t) => {
        const store = await open(t, { maxBytes: 3_000, maxBytesPerUser: 3_000 });
        const user = `u-${randomUUID()}`;
        const x = streamKey({ userKey: user, sessionId: 'sess', streamId: 'x' });
        const y = streamKey({ userKey: user, sessionId: 'sess', streamId: 'y' });
        await store.appendEvents(x, [sized(1, 2_500)], { maxEvents: 10, ttlMs: 200 });
        await eventually('the log to expire', async () => (await store.readEvents(x)).length === 0);
        await store.appendEvents(x, [sized(2, 100)], LIMITS);
        await store.appendEvents(y, [sized(1, 2_000)], LIMITS);
        assert.deepEqual((await store.readEvents(x)).map((e) => e.seq), [2], 'x holds 100 bytes, not 2 600');
      });
    });

    describe('replay logs (events)', () => {
      test('appendEvents / readEvents keep order across calls', async (t) => {
        const store = await open(t);
        const key = streamKey();
        assert.deepEqual(await store.readEvents(key), [], 'unknown stream reads as empty');
        const first: StoredEvent[] = [{ seq: 0, meta: { kind: 'post', requestIds: [1, 'two'] } }, dataEvent(1), dataEvent(2)];
        await store.appendEvents(key, first, LIMITS);
        await store.appendEvents(key, [dataEvent(3)], LIMITS);
        await store.appendEvents(key, [dataEvent(4), dataEvent(5)], LIMITS);
        await store.appendEvents(key, [], LIMITS);
        const read = await store.readEvents(key);
        assert.deepEqual(read.map((e) => e.seq), [0, 1, 2, 3, 4, 5]);
        assert.deepEqual(read[0], first[0]);
        assert.deepEqual(read.slice(1, 3), first.slice(1));
      });

      test('an append already in the log (sent again after its answer was lost) is not appended again', async (t) => {
        const store = await open(t);
        const key = streamKey();
        const first: StoredEvent[] = [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }, dataEvent(1)];
        await store.appendEvents(key, first, LIMITS);
        await store.appendEvents(key, first, LIMITS);
        await store.appendEvents(key, [dataEvent(2)], LIMITS);
        await store.appendEvents(key, [dataEvent(2)], LIMITS);
        // A priming entry (same seq as the event before it) is an entry of its own.
        await store.appendEvents(key, [{ seq: 2, backendEventId: 'b-2' }], LIMITS);
        await store.appendEvents(key, [dataEvent(3)], LIMITS);
        assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 1, 2, 2, 3]);
      });

      test('a log is bounded to maxEvents: the oldest entries are dropped', async (t) => {
        const store = await open(t);
        const key = streamKey();
        const limits = { maxEvents: 5, ttlMs: 60_000 };
        for (let seq = 1; seq <= 8; seq++) await store.appendEvents(key, [dataEvent(seq)], limits);
        assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [4, 5, 6, 7, 8]);

        // One call larger than the bound keeps only its newest entries.
        const big = Array.from({ length: 12 }, (_, i) => dataEvent(100 + i));
        await store.appendEvents(key, big, limits);
        assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [107, 108, 109, 110, 111]);
      });

      test('a very large single append is accepted and bounded', async (t) => {
        const store = await open(t);
        const key = streamKey();
        const events = Array.from({ length: 10_000 }, (_, i) => ({ seq: i, data: `{"n":${i}}` }));
        // (The error of a failing call carries all 10 000 arguments; keep only its first line.)
        await store.appendEvents(key, events, { maxEvents: 1_000, ttlMs: 60_000 }).catch((err: Error) => {
          assert.fail(`appendEvents of 10 000 events in one call failed: ${err.message.split('\n')[0]}`);
        });
        const read = await store.readEvents(key);
        assert.equal(read.length, 1_000);
        assert.equal(read[0]!.seq, 9_000);
        assert.equal(read.at(-1)!.seq, 9_999);
      });

      test('a log expires after its TTL, and every append refreshes the TTL', async (t) => {
        const store = await open(t);
        const expiring = streamKey();
        await store.appendEvents(expiring, [dataEvent(1)], { maxEvents: 10, ttlMs: 250 });
        const appendedAt = Date.now();
        await eventually('the replay log to expire', async () => (await store.readEvents(expiring)).length === 0);
        assert.ok(Date.now() - appendedAt >= 150, 'it did not vanish long before its TTL');

        const refreshed = streamKey();
        const ttl = SLIDING_TTL_MS;
        const start = Date.now();
        let seq = 0;
        while (Date.now() - start < ttl * 2.5) {
          await store.appendEvents(refreshed, [dataEvent(++seq)], { maxEvents: 100, ttlMs: ttl });
          await sleep(250);
        }
        const kept = await store.readEvents(refreshed);
        assert.equal(kept.length, seq, `all ${seq} events are kept while appends keep refreshing the TTL`);
        assert.equal(kept[0]!.seq, 1, 'the first event (older than one TTL) was not dropped');
        await eventually('the idle replay log to expire', async () => (await store.readEvents(refreshed)).length === 0);
      });

      test('separate streams are separate (by stream, session and user)', async (t) => {
        const store = await open(t);
        const base = streamKey();
        const otherStream = { ...base, streamId: `${base.streamId}-2` };
        const otherSession = { ...base, sessionId: `${base.sessionId}-2` };
        const otherUser = { ...base, userKey: `${base.userKey}-2` };
        await store.appendEvents(base, [dataEvent(1)], LIMITS);
        await store.appendEvents(otherStream, [dataEvent(2)], LIMITS);
        await store.appendEvents(otherSession, [dataEvent(3)], LIMITS);
        await store.appendEvents(otherUser, [dataEvent(4)], LIMITS);
        assert.deepEqual((await store.readEvents(base)).map((e) => e.seq), [1]);
        assert.deepEqual((await store.readEvents(otherStream)).map((e) => e.seq), [2]);
        assert.deepEqual((await store.readEvents(otherSession)).map((e) => e.seq), [3]);
        assert.deepEqual((await store.readEvents(otherUser)).map((e) => e.seq), [4]);

        // Bounding or expiring one stream leaves the others alone.
        await store.appendEvents(base, [dataEvent(5), dataEvent(6)], { maxEvents: 1, ttlMs: 100 });
        assert.deepEqual((await store.readEvents(base)).map((e) => e.seq), [6]);
        await eventually('the short-lived stream to expire', async () => (await store.readEvents(base)).length === 0);
        assert.deepEqual((await store.readEvents(otherStream)).map((e) => e.seq), [2]);
      });
    });

    describe('round trips', () => {
      test('session records round-trip unchanged', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const record: SessionRecord = {
          backend: 'jira-cloud',
          backendSessionId: 'b:ß/∂?&=="quoted"\n\ttab',
          protocolVersion: '2025-06-18',
          clientCapabilities: {
            elicitation: { url: {}, form: { applyDefaults: true } },
            sampling: { tools: {} },
            experimental: { nested: { deeper: [1, 2.5, -3, 'x', null, true, false, { k: 'v' }] } },
            emoji: '🚀 ünïcødé',
            empty: {},
            list: [],
          },
          createdAt: Date.now(),
        };
        await store.createSession(user, 'rt', record, 10_000);
        assert.deepStrictEqual(await store.touchSession(user, 'rt', 10_000), record);

        const minimal: SessionRecord = { backend: 'b', protocolVersion: '2025-03-26', clientCapabilities: {}, createdAt: 0 };
        await store.createSession(user, 'min', minimal, 10_000);
        const read = await store.touchSession(user, 'min', 10_000);
        assert.deepStrictEqual(read, minimal);
        assert.equal(Object.hasOwn(read!, 'backendSessionId'), false, 'an absent optional field stays absent');
      });

      test('stored events round-trip unchanged', async (t) => {
        const store = await open(t);
        const key = streamKey();
        const events: StoredEvent[] = [
          { seq: 0, meta: { kind: 'post', requestIds: [0, 'a-string-id', 9_007_199_254_740_991] } },
          { seq: 1, data: '{"jsonrpc":"2.0","id":0,"result":{"text":"line1\\nline2 ✓ \\"q\\""}}', backendEventId: 'backend-evt-17' },
          { seq: 2, data: 'raw text\nwith\r\nnewlines and \u0000 nul' },
          { seq: 3, end: true },
          { seq: 4, meta: { kind: 'get', requestIds: [] } },
        ];
        await store.appendEvents(key, events, LIMITS);
        assert.deepStrictEqual(await store.readEvents(key), events);
      });

      test('stored values are snapshots: later mutation of inputs or outputs does not change them', async (t) => {
        const store = await open(t);
        const user = `user-${randomUUID()}`;
        const record = sessionRecord();
        await store.createSession(user, 'snap', record, 10_000);
        (record.clientCapabilities as Record<string, unknown>).injected = true;
        const read = (await store.touchSession(user, 'snap', 10_000))!;
        assert.equal(Object.hasOwn(read.clientCapabilities, 'injected'), false, 'mutating the input record after create changed the stored session');
        read.backend = 'mutated';
        assert.equal((await store.touchSession(user, 'snap', 10_000))!.backend, 'github', 'mutating a read record changed the stored session');

        const key = streamKey();
        const meta = { kind: 'post' as const, requestIds: [1, 2] };
        await store.appendEvents(key, [{ seq: 0, meta }], LIMITS);
        meta.requestIds.push(3);
        assert.deepEqual((await store.readEvents(key))[0]!.meta!.requestIds, [1, 2], 'mutating the appended event after appendEvents changed the stored log');
        const events = await store.readEvents(key);
        events[0]!.meta!.requestIds.push(99);
        assert.deepEqual((await store.readEvents(key))[0]!.meta!.requestIds, [1, 2], 'mutating a read event changed the stored log');
      });
    });

    describe('keyed values', () => {
      test('put, get, take (single use), delete; a TTL expires them', async (t) => {
        const store = await open(t);
        const key = `state:${randomUUID()}`;
        assert.equal(await store.getValue(key), undefined);
        await store.putValue(key, 'one');
        assert.equal(await store.getValue(key), 'one');
        assert.equal(await store.takeValue(key), 'one', 'take returns the value');
        assert.equal(await store.takeValue(key), undefined, 'and it is gone: single use');
        await store.putValue(key, 'two', 150);
        assert.equal(await store.getValue(key), 'two');
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(await store.getValue(key), undefined, 'expired');
        await store.putValue(key, 'three');
        assert.equal(await store.deleteValue(key), true);
        assert.equal(await store.deleteValue(key), false);
      });

      test('putValueIfAbsent is a lock: only the first caller wins until it expires or is deleted', async (t) => {
        const store = await open(t);
        const key = `lock:${randomUUID()}`;
        const results = await Promise.all([1, 2, 3, 4].map((n) => store.putValueIfAbsent(key, `owner-${n}`, 200)));
        assert.equal(results.filter(Boolean).length, 1, 'exactly one winner among concurrent callers');
        assert.equal(await store.putValueIfAbsent(key, 'late', 200), false);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(await store.putValueIfAbsent(key, 'after-expiry', 200), true);
        assert.equal(await store.deleteValueIf(key, 'someone-else'), false, 'another owner cannot release it');
        assert.equal(await store.deleteValueIf(key, 'after-expiry'), true, 'its owner can');
        assert.equal(await store.putValueIfAbsent(key, 'after-delete', 200), true);
      });
    });

    describe('fields (tool-definition pins)', () => {
      test('putFieldIfAbsent: one winner among concurrent callers; getFields reads every field; deleteField removes one', async (t) => {
        const store = await open(t);
        const key = `pins:${randomUUID()}`;
        assert.deepEqual(await store.getFields(key), {}, 'an unknown key has no fields');
        const results = await Promise.all([1, 2, 3, 4].map((n) => store.putFieldIfAbsent(key, 'search', `replica-${n}`)));
        assert.equal(results.filter(Boolean).length, 1, 'exactly one replica records the first sight');
        const winner = (await store.getFields(key)).search;
        assert.match(winner!, /^replica-[1-4]$/);
        assert.equal(await store.putFieldIfAbsent(key, 'search', 'late'), false);
        await store.putField(key, 'fetch', 'v1');
        await store.putField(key, 'fetch', 'v2');
        assert.deepEqual(await store.getFields(key), { search: winner, fetch: 'v2' });
        assert.equal(await store.deleteField(key, 'fetch'), true);
        assert.equal(await store.deleteField(key, 'fetch'), false, 'a field deleted twice is gone the second time');
        assert.deepEqual(await store.getFields(key), { search: winner });
        assert.deepEqual(await store.getFields(`pins:${randomUUID()}`), {}, 'fields of one key are not seen under another');
      });
    });

    test('countSessions counts live sessions of every user, not expired or deleted ones', async (t) => {
      const store = await open(t);
      assert.equal(await store.countSessions(), 0, 'a fresh store (own key prefix) has none');
      await store.createSession('user-a', 'one', sessionRecord(), 10_000);
      await store.createSession('user-b', 'two', sessionRecord(), 10_000);
      await store.createSession('user-b', 'short', sessionRecord(), 100);
      await store.appendEvents(streamKey({ userKey: 'user-a', sessionId: 'one' }), [dataEvent(1)], { maxEvents: 10, ttlMs: 10_000 });
      await store.deleteSession('user-a', 'one');
      await new Promise((resolve) => setTimeout(resolve, 250));
      assert.equal(await store.countSessions(), 1, 'only user-b/two is alive; event logs are not sessions');
    });

    test(`ping resolves while the store is healthy; kind names the implementation (${kind})`, async (t) => {
      const store = await open(t);
      await assert.doesNotReject(store.ping());
      assert.equal(store.kind, kind, '/readyz reports it as `store`');
    });
  });
}

// ------------------------------------------------------------------ runs ---

storeContract('MemoryStore', 'memory', async (budget) => new MemoryStore(50, budget));

let redis: RedisHandle | undefined;

describe('Redis-backed', () => {
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis?.stop();
  });

  storeContract('RedisStore', 'redis', async (replayBudget) => {
    const store = new RedisStore({ url: redis!.url, keyPrefix: `sbct-${randomUUID()}:`, sessionCountCacheMs: 0, replayBudget });
    await store.ready(10_000);
    return store;
  });

  describe('RedisStore during an outage', () => {
    test('operations reject promptly while Redis is down, and the same store works again after it returns', async (t) => {
      const store = new RedisStore({ url: redis!.url, keyPrefix: `sbct-outage-${randomUUID()}:` });
      t.after(() => store.close());
      await store.ready(10_000);
      const user = `user-${randomUUID()}`;
      const key = streamKey({ userKey: user });
      await store.createSession(user, 'before', sessionRecord(), 60_000);
      await store.ping();

      await redis!.pause();
      t.after(() => redis!.resume());

      const operations: Array<[string, () => Promise<unknown>]> = [
        ['ping', () => store.ping()],
        ['createSession', () => store.createSession(user, 'during', sessionRecord(), 60_000)],
        ['touchSession', () => store.touchSession(user, 'before', 60_000)],
        ['deleteSession', () => store.deleteSession(user, 'before')],
        ['appendEvents', () => store.appendEvents(key, [dataEvent(1)], LIMITS)],
        ['readEvents', () => store.readEvents(key)],
      ];
      for (const [name, run] of operations) {
        const started = Date.now();
        const outcome = await Promise.race([
          run().then(
            () => 'resolved' as const,
            (err: unknown) => err as Error,
          ),
          sleep(5_000).then(() => 'hung' as const),
        ]);
        const elapsed = Date.now() - started;
        assert.notEqual(outcome, 'hung', `${name} hung for 5 s while Redis was down`);
        assert.notEqual(outcome, 'resolved', `${name} resolved while Redis was down`);
        assert.ok(outcome instanceof Error, `${name} rejected with an Error`);
        assert.ok(elapsed < 2_000, `${name} took ${elapsed} ms to fail; it must fail promptly`);
      }

      await redis!.resume();
      // The same object reconnects by itself (bounded wait), without being recreated.
      await waitUntil(
        async () => {
          await store.ping();
          return true;
        },
        { what: 'the RedisStore to reconnect after Redis came back', timeoutMs: 15_000, intervalMs: 100 },
      );
      // The resumed server is empty (no persistence), and the store serves every operation.
      assert.equal(await store.touchSession(user, 'before', 60_000), undefined);
      await store.createSession(user, 'after', sessionRecord({ backend: 'after' }), 60_000);
      assert.equal((await store.touchSession(user, 'after', 60_000))?.backend, 'after');
      await store.appendEvents(key, [dataEvent(7)], LIMITS);
      assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [7]);
      assert.equal(await store.deleteSession(user, 'after'), true);
    });

    test('ping rejects while Redis is paused and resolves again after resume', async (t) => {
      const store = new RedisStore({ url: redis!.url, keyPrefix: `sbct-ping-${randomUUID()}:` });
      t.after(() => store.close());
      await store.ready(10_000);
      await store.ping();

      await redis!.pause();
      t.after(() => redis!.resume());
      const started = Date.now();
      await assert.rejects(
        Promise.race([store.ping(), sleep(5_000).then(() => Promise.reject(new Error('HUNG: ping did not settle within 5 s')))]).then(() => {
          throw new Error('ping resolved while Redis was paused');
        }),
        (err: Error) => !/HUNG|resolved while/.test(err.message),
      );
      assert.ok(Date.now() - started < 2_000, `ping took ${Date.now() - started} ms to reject`);
      // Still failing a little later (not a one-off), while Redis stays down.
      await sleep(300);
      await assert.rejects(store.ping());

      await redis!.resume();
      await waitUntil(
        async () => {
          await store.ping();
          return true;
        },
        { what: 'ping to succeed after resume', timeoutMs: 15_000, intervalMs: 100 },
      );
      assert.equal(store.redis.status, 'ready');
    });
  });
});

// A real 3-master Redis Cluster (issue 17): the same contract, where every multi-key script
// must stay within one hash slot.
let cluster: RedisClusterHandle | undefined;

describe('Redis Cluster-backed', () => {
  before(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  });
  after(async () => {
    await cluster?.stop();
  });

  const openCluster = async (replayBudget?: ReplayBudget) => {
    const store = new RedisStore({ mode: 'cluster', nodes: cluster!.nodes, keyPrefix: `sbct-${randomUUID()}:`, sessionCountCacheMs: 0, replayBudget });
    await store.ready(10_000);
    return store;
  };

  storeContract('RedisStore (cluster)', 'redis', openCluster);

  test('appends of many users in one turn of the event loop land, each user on its own slot', async (t) => {
    const store = await openCluster();
    t.after(() => store.close());
    assert.equal(store.mode, 'cluster');
    const keys = Array.from({ length: 40 }, () => streamKey());
    // All in the same turn: one batch for the append batcher, spread over many slots.
    await Promise.all(keys.map((key, i) => store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [i] } }, dataEvent(1)], LIMITS)));
    for (const [i, key] of keys.entries()) assert.deepEqual((await store.readEvents(key)).map((e) => e.meta?.requestIds ?? e.seq), [[i], 1]);
    const slots = new Set(await Promise.all(keys.map((key) => store.redis.cluster('KEYSLOT', store.keys.stream(key)))));
    assert.ok(slots.size > 1, 'the batch spanned several slots (one call would have been refused with CROSSSLOT)');
  });

  test("a new store's first concurrent commands go straight to their nodes (none refused while connecting, none bounced with MOVED)", async (t) => {
    // Redis counts the MOVED replies it sent (INFO errorstats); a command refused by ioredis
    // while a node connection was still being made was retried through another node: MOVED.
    const moved = async () => {
      let total = 0;
      for (const url of cluster!.nodes) total += Number(/errorstat_MOVED:count=(\d+)/.exec(String(await commandOnce(Number(new URL(url).port), 'INFO', 'errorstats')))?.[1] ?? 0);
      return total;
    };
    const before = await moved();
    const store = await openCluster();
    t.after(() => store.close());
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => store.putValueIfAbsent(`first-${i}`, 'v', 60_000)));
    assert.ok(results.every(Boolean));
    assert.equal(await moved(), before, 'no command was redirected');
  });

  test('every key of one user shares a hash slot; ping reads the cluster state', async (t) => {
    const store = await openCluster();
    t.after(() => store.close());
    const key = streamKey();
    await store.createSession(key.userKey, key.sessionId, sessionRecord(), 10_000);
    await store.appendEvents(key, [dataEvent(1)], LIMITS);
    const slots = new Set<number>();
    for (const name of [store.keys.session(key.userKey, key.sessionId), store.keys.sessionIndex(key.userKey), store.keys.stream(key), store.keys.streamSizes(key.userKey), store.keys.streamOrder(key.userKey)]) {
      slots.add(Number(await store.redis.cluster('KEYSLOT', `${store.keyPrefix}${name}`)));
      assert.equal(await store.redis.exists(name), 1, `${name} exists`);
    }
    assert.equal(slots.size, 1, 'one slot for the user');
    await store.ping();
    assert.match(store.describe(), /^redis cluster, connection ready$/);
  });
});
