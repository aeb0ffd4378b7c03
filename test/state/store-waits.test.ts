/**
 * A Redis blip does not fail the store's operations (issue 45 §1; src/state/store-waits.ts),
 * on a real redis-server:
 * - Redis stopped and started again within `unavailableWait`: get, put, session and
 *   coordinator calls issued during the outage succeed once it is back;
 * - an outage longer than the wait: StateUnavailableError after about the wait;
 * - past the cap on waiting operations, the next one is refused at once;
 * - nothing is written twice: a call whose answer was lost (a proxy drops Redis' reply and
 *   the connection) is sent again only when it is idempotent — a SET, a session touch, a
 *   replay-log append (whose script skips what already ran) — and a SET NX, a publish or a
 *   mailbox post are not (and ioredis does not resend anything by itself);
 * - each wait is reported (served, gave_up, refused), as the metrics count it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { StateUnavailableError } from '../../src/state/errors.js';
import { RedisCoordinator } from '../../src/state/redis-coordinator.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { StoreWaitOutcome } from '../../src/state/store-waits.js';
import type { SessionRecord } from '../../src/state/store.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { waitUntil } from '../helpers/child.js';
import { commandOnce } from '../helpers/redis-processes.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const RECORD: SessionRecord = { backend: 'b', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 1 };
const LIMITS = { maxEvents: 100, ttlMs: 60_000 };

let redis: RedisHandle;

before(async () => {
  // Persistent: what was written before an outage is still there after it, as in production.
  redis = await startRedis({ persistent: true });
});
after(async () => {
  await redis?.stop();
});

interface Opened {
  store: RedisStore;
  waits: Array<{ outcome: StoreWaitOutcome; seconds: number }>;
}

async function open(t: TestContext, options: { waitMs: number; maxWaiting?: number; url?: string }): Promise<Opened> {
  const store = new RedisStore({ url: options.url ?? redis.url, keyPrefix: `sbw-${randomUUID()}:`, unavailableWaitMs: options.waitMs, maxWaiting: options.maxWaiting });
  t.after(() => store.close());
  await store.ready(10_000);
  const waits: Opened['waits'] = [];
  store.waits.observe((outcome, seconds) => waits.push({ outcome, seconds }));
  return { store, waits };
}

/** Settles `p` into what happened and how long it took from `since`. */
async function outcome<T>(p: Promise<T>, since: number): Promise<{ value?: T; error?: Error; ms: number }> {
  try {
    const value = await p;
    return { value, ms: Date.now() - since };
  } catch (err) {
    return { error: err as Error, ms: Date.now() - since };
  }
}

describe('Redis stopped and started again within unavailableWait', () => {
  test('get, put, session and coordinator calls issued during the outage succeed after the restart', async (t) => {
    const { store, waits } = await open(t, { waitMs: 8_000 });
    const coordinator = new RedisCoordinator(store.redis, store.keyPrefix, store.waits);
    t.after(() => coordinator.close());
    const user = `u-${randomUUID()}`;
    await store.putValue('before', 'kept', 60_000);
    await store.createSession(user, 's1', RECORD, 60_000);

    await redis.pause();
    t.after(() => redis.resume());
    const since = Date.now();
    const during = {
      get: outcome(store.getValue('before'), since),
      put: outcome(store.putValue('during', 'written', 60_000), since),
      touch: outcome(store.touchSession(user, 's1', 60_000), since),
      create: outcome(store.createSession(user, 's2', RECORD, 60_000), since),
      append: outcome(store.appendEvents({ userKey: user, sessionId: 's1', streamId: 'st' }, [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }], LIMITS), since),
      hold: outcome(coordinator.holdStream({ userKey: user, sessionId: 's1', streamId: 'st' }, 60_000), since),
      claim: outcome(coordinator.claimStandalone(user, 's1', 'get-1', 60_000, false), since),
    };
    await sleep(1_500);
    assert.equal(store.waits.held, 7, 'all seven operations are waiting');
    await redis.resume();

    const results = Object.fromEntries(await Promise.all(Object.entries(during).map(async ([name, p]) => [name, await p] as const)));
    for (const [name, result] of Object.entries(results)) {
      assert.equal(result.error, undefined, `${name} failed: ${result.error?.message}`);
      assert.ok(result.ms >= 1_400, `${name} waited for Redis (${result.ms} ms)`);
    }
    assert.equal(results.get!.value, 'kept');
    assert.deepEqual(results.touch!.value, RECORD);
    assert.equal((results.claim!.value as { granted: boolean }).granted, true);
    assert.equal(await store.getValue('during'), 'written');
    assert.deepEqual(await store.touchSession(user, 's2', 60_000), RECORD);
    assert.deepEqual((await store.readEvents({ userKey: user, sessionId: 's1', streamId: 'st' })).map((e) => e.seq), [0], 'the append landed once');
    assert.equal(store.waits.held, 0);
    assert.equal(waits.length, 7);
    assert.ok(waits.every((w) => w.outcome === 'served' && w.seconds >= 1.4 && w.seconds < 8), JSON.stringify(waits));
  });
});

describe('an outage longer than unavailableWait', () => {
  test('fails with StateUnavailableError after about the wait', async (t) => {
    const { store, waits } = await open(t, { waitMs: 1_200 });
    await redis.pause();
    t.after(() => redis.resume());
    const since = Date.now();
    const [get, put, touch] = await Promise.all([outcome(store.getValue('k'), since), outcome(store.putValue('k', 'v'), since), outcome(store.touchSession('u', 's', 1_000), since)]);
    for (const [name, result] of Object.entries({ get, put, touch })) {
      assert.ok(result.error instanceof StateUnavailableError, `${name}: ${result.error?.name} ${result.error?.message}`);
      assert.ok(result.ms >= 1_150 && result.ms < 3_000, `${name} failed after ${result.ms} ms (wait 1200 ms)`);
    }
    assert.deepEqual(
      waits.map((w) => w.outcome),
      ['gave_up', 'gave_up', 'gave_up'],
    );
    assert.ok(waits.every((w) => w.seconds >= 1.15 && w.seconds < 3), JSON.stringify(waits));
    // Readiness does not wait: it says at once that the store is away.
    const pinged = Date.now();
    await assert.rejects(store.ping());
    assert.ok(Date.now() - pinged < 1_000, 'ping (readiness) failed at once');
  });

  test('unavailableWait 0: failures pass through at once, as before', async (t) => {
    const { store, waits } = await open(t, { waitMs: 0 });
    await redis.pause();
    t.after(() => redis.resume());
    const since = Date.now();
    const result = await outcome(store.getValue('k'), since);
    assert.ok(result.error && !(result.error instanceof StateUnavailableError), `the connection's own error: ${result.error?.message}`);
    assert.ok(result.ms < 1_000, `${result.ms} ms`);
    assert.deepEqual(waits, []);
  });
});

describe('the cap on waiting operations', () => {
  test('beyond it, an operation is refused at once; those held are served once Redis is back', async (t) => {
    const { store, waits } = await open(t, { waitMs: 10_000, maxWaiting: 2 });
    await redis.pause();
    t.after(() => redis.resume());
    const since = Date.now();
    const held = [outcome(store.putValue('a', '1'), since), outcome(store.putValue('b', '2'), since)];
    await sleep(300);
    assert.equal(store.waits.held, 2);
    const refusedAt = Date.now();
    const refused = await outcome(store.getValue('c'), refusedAt);
    assert.ok(refused.error instanceof StateUnavailableError, `refused: ${refused.error?.message}`);
    assert.ok(refused.ms < 200, `refused at once (${refused.ms} ms)`);
    assert.deepEqual(waits, [{ outcome: 'refused', seconds: 0 }]);

    await redis.resume();
    for (const result of await Promise.all(held)) assert.equal(result.error, undefined, result.error?.message);
    assert.equal(await store.getValue('a'), '1');
    assert.deepEqual(
      waits.map((w) => w.outcome),
      ['refused', 'served', 'served'],
    );
  });
});

/**
 * A TCP proxy in front of Redis that, when armed, lets the next command through and then
 * closes that connection instead of passing Redis' answer back: the command ran, and its
 * caller cannot know.
 */
async function answerDroppingProxy(port: number): Promise<{ url: string; arm(): void; dropped(): number; close(): Promise<void> }> {
  let armed = false;
  let dropped = 0;
  const proxy = await startTcpProxy(port, () => {
    // The connection that sends the first command after arming loses that command's answer.
    let victim = false;
    return {
      fromClient(chunk, { upstream }) {
        if (armed) {
          armed = false;
          victim = true;
        }
        upstream.write(chunk);
      },
      fromUpstream(chunk, connection) {
        if (!victim) return void connection.client.write(chunk);
        dropped++;
        connection.close();
      },
    };
  });
  return {
    url: `redis://127.0.0.1:${proxy.port}`,
    arm: () => (armed = true),
    dropped: () => dropped,
    close: proxy.close,
  };
}

describe('a call that ran but whose answer was lost', () => {
  test('is sent again when idempotent (SET, a session touch, an append, once); never when it would write twice or answer wrongly (SET NX, publish, mailbox)', async (t) => {
    const proxy = await answerDroppingProxy(redis.port);
    t.after(() => proxy.close());
    const { store, waits } = await open(t, { waitMs: 5_000, url: proxy.url });
    const coordinator = new RedisCoordinator(store.redis, store.keyPrefix, store.waits);
    t.after(() => coordinator.close());
    const user = `u-${randomUUID()}`;
    const key = { userKey: user, sessionId: 's1', streamId: 'st' };
    const direct = async (...command: string[]) => commandOnce(redis.port, command[0]!, ...command.slice(1));
    // Armed only on a ready connection, so that the command losing its answer is the operation's.
    const arm = async () => {
      await waitUntil(async () => (store.redis.status === 'ready' ? true : undefined), { what: 'the store to reconnect', timeoutMs: 10_000, intervalMs: 10 });
      proxy.arm();
    };
    await store.createSession(user, 's1', RECORD, 60_000);

    // Idempotent: sent again after the reconnect, and answered.
    await arm();
    await store.putValue('idem', 'v1', 60_000);
    assert.equal(proxy.dropped(), 1);
    assert.equal(await store.getValue('idem'), 'v1');
    await arm();
    assert.deepEqual(await store.touchSession(user, 's1', 60_000), RECORD);
    assert.equal(proxy.dropped(), 2);
    // The append ran, lost its answer, and was sent again: the script found it there.
    await arm();
    await store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }, { seq: 1, data: '{"n":1}' }], LIMITS);
    assert.equal(proxy.dropped(), 3);
    assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 1], 'the append landed once');
    assert.deepEqual(
      waits.map((w) => w.outcome),
      ['served', 'served', 'served'],
    );

    // Not idempotent: fails (503), and ran exactly once.
    await arm();
    await assert.rejects(store.putValueIfAbsent('lock', 'me', 60_000), StateUnavailableError);
    await arm();
    await assert.rejects(coordinator.postToMailbox(user, 's1', 'mail', 60_000, 10), StateUnavailableError);
    await arm();
    await assert.rejects(coordinator.broadcast({ type: 'changed', userKey: user, sessionId: 's1' }), StateUnavailableError);
    assert.equal(proxy.dropped(), 6);
    await sleep(500); // anything ioredis might still resend after its reconnect would land by now
    assert.equal(await direct('GET', `${store.keyPrefix}${store.keys.value('lock')}`), 'me', 'the SET NX ran once');
    assert.equal(await store.putValueIfAbsent('lock', 'other', 60_000), false);
    assert.equal(await direct('LLEN', `${store.keyPrefix}${store.keys.mailbox(user, 's1')}`), 1, 'the mailbox post ran once');
    assert.deepEqual(
      waits.map((w) => `${w.outcome}${w.outcome === 'gave_up' ? ` ${w.seconds}` : ''}`),
      ['served', 'served', 'served', 'gave_up 0', 'gave_up 0', 'gave_up 0'],
      'what could not be sent again gave up at once',
    );
  });

  test('a call refused before it ran is sent again, even when not idempotent', async (t) => {
    const { store } = await open(t, { waitMs: 8_000 });
    const user = `u-${randomUUID()}`;
    const key = { userKey: user, sessionId: 's1', streamId: 'st' };
    await redis.pause();
    t.after(() => redis.resume());
    const append = store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }], LIMITS);
    const lock = store.putValueIfAbsent(`lock-${user}`, 'me', 60_000);
    await sleep(800);
    await redis.resume();
    await append;
    assert.equal(await lock, true);
    assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0]);
  });
});
