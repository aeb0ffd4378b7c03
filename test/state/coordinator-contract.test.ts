/**
 * The coordination contract (SPEC §5, src/state/coordinator.ts), like the store's
 * (store-contract.test.ts): ONE suite, `coordinatorContract`, run against the in-memory
 * coordinator and against the Redis coordinator on a real redis-server and on a real
 * 3-master Redis Cluster. What one replica relies on is asserted for every implementation
 * (standalone claims and their leases, the mailbox, detached stream holds, messages to
 * itself); what replicas sharing one Redis rely on, `sharedContract`, for Redis only (a
 * claim or hold seen and respected by the other replica, a message reaching the replica it
 * is addressed to and no other, events appended on one replica watched from another).
 *
 * Timing: leases are short (hundreds of ms) where expiry is asserted, and "gone" checks
 * sleep past the TTL and look once. Messages travel over pub/sub: every wait for one is
 * bounded (waitUntil), and an absence is asserted only once a message sent after it, over
 * the same connection, has arrived (pub/sub keeps a publisher's order).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test, type TestContext } from 'node:test';
import { isBridgeMessage, type Coordinator, type SessionMessage } from '../../src/state/coordinator.js';
import { MemoryCoordinator } from '../../src/state/memory-coordinator.js';
import { RedisCoordinator } from '../../src/state/redis-coordinator.js';
import { RedisStore, type RedisStoreOptions } from '../../src/state/redis-store.js';
import type { StoredEvent, StreamKey } from '../../src/state/store.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis } from '../helpers/redis.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';

/** One replica: its coordinator and every message it was handed (readiness probes aside). */
interface Replica {
  coordinator: Coordinator;
  received: SessionMessage[];
  /** Redis only: the replica's store, whose appends are published to stream watchers. */
  store?: RedisStore;
}

/** Opens a replica of one deployment (Redis: every replica of it shares the Redis and the prefix). */
type ReplicaFactory = (t: TestContext) => Promise<Replica>;
/** A fresh deployment (a new prefix): its replicas share state with each other only. */
type DeploymentFactory = () => ReplicaFactory;

const LONG = 60_000;
const SHORT = 300;
const PAST_SHORT = 700;
const LIMITS = { maxEvents: 100, ttlMs: 60_000 };
/** Readiness probes (see {@link listening}) carry this user. */
const PROBE = 'probe';

const user = () => `u-${randomUUID()}`;
const session = () => `s-${randomUUID()}`;
const streamKey = (overrides: Partial<StreamKey> = {}): StreamKey => ({ userKey: user(), sessionId: session(), streamId: `st-${randomUUID()}`, ...overrides });
const dataEvent = (seq: number): StoredEvent => ({ seq, data: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { n: seq } }) });
const deliver = (userKey: string, sessionId: string, data: string): SessionMessage => ({ type: 'deliver', userKey, sessionId, streamId: 'st', data });
const changed = (sessionId: string): SessionMessage => ({ type: 'changed', userKey: 'marker', sessionId });
const messages = (r: Replica) => r.received.filter((m) => m.userKey !== PROBE);

function recording(coordinator: Coordinator): Replica {
  const received: SessionMessage[] = [];
  // The contract's messages are session messages; a bridged call's travel the same way (bridge-replicas tests).
  coordinator.onMessage((message) => {
    if (!isBridgeMessage(message) && message.type !== 'pins-changed') received.push(message);
  });
  return { coordinator, received };
}

/** Polls until `check` holds (bounded). */
async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  await waitUntil(async () => ((await check()) ? true : undefined), { what, timeoutMs, intervalMs: 20 });
}

/**
 * Resolves once every replica receives broadcasts: a Redis coordinator subscribes to its
 * channels in the background when it is made, and a message published before that is lost.
 */
async function listening(replicas: Replica[]): Promise<void> {
  await waitUntil(
    async () => {
      await replicas[0]!.coordinator.broadcast({ type: 'changed', userKey: PROBE, sessionId: randomUUID() });
      return replicas.every((r) => r.received.some((m) => m.userKey === PROBE)) ? true : undefined;
    },
    { what: 'every replica to listen', timeoutMs: 10_000, intervalMs: 50 },
  );
}

/** What every implementation promises to the replica that uses it. */
function coordinatorContract(name: string, deployment: DeploymentFactory): void {
  describe(`Coordinator contract: ${name}`, () => {
    const open = (t: TestContext) => deployment()(t);

    test('two coordinators are two replicas: their ids differ', async (t) => {
      const replica = deployment();
      const [a, b] = [await replica(t), await replica(t)];
      assert.equal(typeof a.coordinator.replicaId, 'string');
      assert.ok(a.coordinator.replicaId.length > 0);
      assert.notEqual(a.coordinator.replicaId, b.coordinator.replicaId);
    });

    describe('the standalone stream claim', () => {
      test('the first stream gets it, a second is refused naming the holder, and force takes it over', async (t) => {
        const { coordinator: c } = await open(t);
        const [u, s] = [user(), session()];
        assert.equal(await c.standaloneHolder(u, s), undefined, 'nobody holds an unclaimed session');
        assert.deepEqual(await c.claimStandalone(u, s, 'st1', LONG, false), { granted: true, previous: undefined, mailbox: [] });
        assert.deepEqual(await c.standaloneHolder(u, s), { replicaId: c.replicaId, streamId: 'st1' });

        const refused = await c.claimStandalone(u, s, 'st2', LONG, false);
        assert.deepEqual(refused, { granted: false, previous: { replicaId: c.replicaId, streamId: 'st1' }, mailbox: [] });
        assert.deepEqual(await c.standaloneHolder(u, s), { replicaId: c.replicaId, streamId: 'st1' }, 'a refused claim changes nothing');

        const forced = await c.claimStandalone(u, s, 'st3', LONG, true);
        assert.deepEqual(forced, { granted: true, previous: { replicaId: c.replicaId, streamId: 'st1' }, mailbox: [] });
        assert.deepEqual(await c.standaloneHolder(u, s), { replicaId: c.replicaId, streamId: 'st3' });
      });

      test('only the holding stream renews or releases the claim', async (t) => {
        const { coordinator: c } = await open(t);
        const [u, s] = [user(), session()];
        await c.claimStandalone(u, s, 'st1', LONG, false);
        assert.equal(await c.renewStandalone(u, s, 'st2', LONG), false, 'another stream cannot renew');
        assert.equal(await c.renewStandalone(u, s, 'st1', LONG), true);
        await c.releaseStandalone(u, s, 'st2');
        assert.deepEqual(await c.standaloneHolder(u, s), { replicaId: c.replicaId, streamId: 'st1' }, 'another stream cannot release');
        await c.releaseStandalone(u, s, 'st1');
        assert.equal(await c.standaloneHolder(u, s), undefined, 'released');
        assert.equal(await c.renewStandalone(u, s, 'st1', LONG), false, 'a released claim cannot be renewed');
        assert.deepEqual(await c.claimStandalone(u, s, 'st2', LONG, false), { granted: true, previous: undefined, mailbox: [] }, 'free again after release');

        // Taken over: the old stream can neither renew nor release the new one's claim.
        await c.claimStandalone(u, s, 'st3', LONG, true);
        assert.equal(await c.renewStandalone(u, s, 'st2', LONG), false);
        await c.releaseStandalone(u, s, 'st2');
        assert.deepEqual(await c.standaloneHolder(u, s), { replicaId: c.replicaId, streamId: 'st3' });
      });

      test('renewing many claims at once answers for each: held, taken over, released, lapsed (issue 45 §3)', async (t) => {
        const { coordinator: c } = await open(t);
        const [alice, bob] = [user(), user()];
        // More than one script's batch (RENEW_BATCH 500) of one user, and a few of another.
        const held = Array.from({ length: 520 }, (_, n) => streamKey({ userKey: n < 510 ? alice : bob, streamId: `st-${n}` }));
        // Claimed for long enough that the 520 claims cannot lapse before the renewal, even on a busy machine.
        const claimMs = 2_500;
        for (const k of held) await c.claimStandalone(k.userKey, k.sessionId, k.streamId, claimMs, false);
        const [taken, released, lapsed] = [held[3]!, held[515]!, streamKey({ userKey: bob })];
        await c.claimStandalone(taken.userKey, taken.sessionId, 'st-new', LONG, true);
        await c.releaseStandalone(released.userKey, released.sessionId, released.streamId);
        const answers = await c.renewStandalones([...held, lapsed], LONG);
        const expected = [...held.map((k) => k !== taken && k !== released), false];
        assert.deepEqual(answers, expected);
        await sleep(claimMs + 500);
        for (const k of [held[0]!, held[509]!, held[519]!]) assert.deepEqual(await c.standaloneHolder(k.userKey, k.sessionId), { replicaId: c.replicaId, streamId: k.streamId }, 'renewed past its first TTL');
        assert.deepEqual(await c.standaloneHolder(taken.userKey, taken.sessionId), { replicaId: c.replicaId, streamId: 'st-new' }, "the taken-over claim is the new stream's");
        assert.equal(await c.standaloneHolder(released.userKey, released.sessionId), undefined, 'a released claim is not brought back');
        assert.deepEqual(await c.renewStandalones([], LONG), []);
      });

      test('a claim lapses after its TTL, and renewing sets a new one', async (t) => {
        const { coordinator: c } = await open(t);
        const u = user();
        const [lapsing, renewed] = [session(), session()];
        await c.claimStandalone(u, lapsing, 'st1', SHORT, false);
        await c.claimStandalone(u, renewed, 'st1', SHORT, false);
        assert.equal(await c.renewStandalone(u, renewed, 'st1', LONG), true);
        await sleep(PAST_SHORT);
        assert.equal(await c.standaloneHolder(u, lapsing), undefined, `the claim outlived its ${SHORT} ms TTL`);
        assert.equal(await c.renewStandalone(u, lapsing, 'st1', LONG), false, 'a lapsed claim cannot be renewed');
        assert.deepEqual(await c.claimStandalone(u, lapsing, 'st2', LONG, false), { granted: true, previous: undefined, mailbox: [] });
        assert.deepEqual(await c.standaloneHolder(u, renewed), { replicaId: c.replicaId, streamId: 'st1' }, 'the renewed claim is still held');
      });

      test('claims are per user and per session', async (t) => {
        const { coordinator: c } = await open(t);
        const [alice, bob, s, other] = [user(), user(), session(), session()];
        await c.claimStandalone(alice, s, 'st-alice', LONG, false);
        assert.equal((await c.claimStandalone(bob, s, 'st-bob', LONG, false)).granted, true, 'the same session id of another user is another session');
        assert.equal((await c.claimStandalone(alice, other, 'st-other', LONG, false)).granted, true, "another session of the same user");
        await c.releaseStandalone(bob, s, 'st-bob');
        assert.deepEqual(await c.standaloneHolder(alice, s), { replicaId: c.replicaId, streamId: 'st-alice' }, "releasing bob's left alice's");
      });
    });

    describe('the mailbox', () => {
      test('waits for the next granted claim, which takes it in order, once; a refused claim leaves it', async (t) => {
        const { coordinator: c } = await open(t);
        const [u, s, other] = [user(), session(), session()];
        for (const data of ['m1', 'm2', 'm3']) await c.postToMailbox(u, s, data, LONG, 10);
        await c.postToMailbox(u, other, 'x', LONG, 10);
        assert.deepEqual((await c.claimStandalone(u, s, 'st1', LONG, false)).mailbox, ['m1', 'm2', 'm3']);
        assert.deepEqual((await c.claimStandalone(u, s, 'st2', LONG, true)).mailbox, [], 'taken by the first claim');

        await c.postToMailbox(u, s, 'm4', LONG, 10);
        assert.deepEqual(await c.claimStandalone(u, s, 'st3', LONG, false), { granted: false, previous: { replicaId: c.replicaId, streamId: 'st2' }, mailbox: [] });
        await c.releaseStandalone(u, s, 'st2');
        assert.deepEqual((await c.claimStandalone(u, s, 'st3', LONG, false)).mailbox, ['m4'], 'kept through the refused claim');
        assert.deepEqual((await c.claimStandalone(u, other, 'st1', LONG, false)).mailbox, ['x'], "each session's own mailbox");
      });

      test('keeps the newest maxMessages', async (t) => {
        const { coordinator: c } = await open(t);
        const [u, s] = [user(), session()];
        for (const data of ['1', '2', '3', '4', '5']) await c.postToMailbox(u, s, data, LONG, 3);
        assert.deepEqual((await c.claimStandalone(u, s, 'st', LONG, false)).mailbox, ['3', '4', '5']);
      });

      test('is forgotten after its TTL', async (t) => {
        const { coordinator: c } = await open(t);
        const [u, lapsing, kept] = [user(), session(), session()];
        await c.postToMailbox(u, lapsing, 'gone', SHORT, 10);
        await c.postToMailbox(u, kept, 'kept', LONG, 10);
        await sleep(PAST_SHORT);
        assert.deepEqual((await c.claimStandalone(u, lapsing, 'st', LONG, false)).mailbox, [], `the mailbox outlived its ${SHORT} ms TTL`);
        assert.deepEqual((await c.claimStandalone(u, kept, 'st', LONG, false)).mailbox, ['kept']);
      });
    });

    test('a detached stream is held by this replica until released or lapsed; holding again renews', async (t) => {
      const { coordinator: c } = await open(t);
      const key = streamKey();
      assert.equal(await c.streamHolder(key), undefined);
      await c.holdStream(key, LONG);
      assert.equal(await c.streamHolder(key), c.replicaId);
      assert.equal(await c.streamHolder({ ...key, streamId: 'another' }), undefined, 'per stream');
      await c.releaseStream(key);
      assert.equal(await c.streamHolder(key), undefined, 'released');

      const renewed = streamKey();
      await c.holdStream(key, SHORT);
      await c.holdStream(renewed, SHORT);
      await c.holdStream(renewed, LONG);
      await sleep(PAST_SHORT);
      assert.equal(await c.streamHolder(key), undefined, `the hold outlived its ${SHORT} ms TTL`);
      assert.equal(await c.streamHolder(renewed), c.replicaId, 'held again with a longer TTL');
    });

    test('messages: sent to this replica or broadcast reach every handler; sent to another replica, not this one', async (t) => {
      const replica = await open(t);
      // A Redis coordinator subscribes its inbox and the broadcast channel in one command, in
      // the background: once a broadcast arrives, a message to this replica arrives too.
      await listening([replica]);
      const c = replica.coordinator;
      const second: SessionMessage[] = [];
      c.onMessage((message) => second.push(message as SessionMessage));
      const [u, s] = [user(), session()];
      const mine = deliver(u, s, '{"jsonrpc":"2.0","method":"notifications/message"}');
      const notMine: SessionMessage = { type: 'stop', userKey: u, sessionId: s, streamId: 'st' };
      const marker = changed(randomUUID());
      await c.send(c.replicaId, mine);
      await c.send(randomUUID(), notMine);
      await c.broadcast(marker);
      // Both arrive; in a Redis Cluster a message to one replica and a broadcast may travel by
      // different nodes, so only within one channel is the order promised (see the shared
      // contract below), and the absence of `notMine` is judged once both have arrived.
      const arrived = (list: SessionMessage[]) => [mine, marker].every((want) => list.some((m) => m.sessionId === want.sessionId));
      await eventually('the message to this replica and the broadcast marker', () => arrived(messages(replica)) && arrived(second));
      const inOrder = (list: SessionMessage[]) => [...list].sort((a, b) => (a.sessionId === mine.sessionId ? -1 : b.sessionId === mine.sessionId ? 1 : 0));
      assert.deepEqual(inOrder(messages(replica)), [mine, marker]);
      assert.deepEqual(inOrder(second.filter((m) => m.userKey !== PROBE)), [mine, marker], 'every handler');
    });
  });
}

/** What replicas sharing one Redis promise each other. */
function sharedContract(name: string, deployment: DeploymentFactory): void {
  describe(`Coordinator contract between replicas: ${name}`, () => {
    async function pair(t: TestContext): Promise<[Replica, Replica]> {
      const replica = deployment();
      const replicas: [Replica, Replica] = [await replica(t), await replica(t)];
      await listening(replicas);
      return replicas;
    }

    test("a claim on one replica is seen and respected by the other; force takes it over, and the first can no longer renew or release it", async (t) => {
      const [a, b] = await pair(t);
      const [u, s] = [user(), session()];
      await a.coordinator.claimStandalone(u, s, 'st-a', LONG, false);
      const holderA = { replicaId: a.coordinator.replicaId, streamId: 'st-a' };
      assert.deepEqual(await b.coordinator.standaloneHolder(u, s), holderA);
      assert.deepEqual(await b.coordinator.claimStandalone(u, s, 'st-b', LONG, false), { granted: false, previous: holderA, mailbox: [] });
      assert.deepEqual(await b.coordinator.claimStandalone(u, s, 'st-b', LONG, true), { granted: true, previous: holderA, mailbox: [] });
      assert.equal(await a.coordinator.renewStandalone(u, s, 'st-a', LONG), false);
      await a.coordinator.releaseStandalone(u, s, 'st-a');
      assert.deepEqual(await a.coordinator.standaloneHolder(u, s), { replicaId: b.coordinator.replicaId, streamId: 'st-b' });
    });

    test('a mailbox posted on one replica goes to the claim on the other', async (t) => {
      const [a, b] = await pair(t);
      const [u, s] = [user(), session()];
      await a.coordinator.postToMailbox(u, s, 'from a', LONG, 10);
      assert.deepEqual((await b.coordinator.claimStandalone(u, s, 'st', LONG, false)).mailbox, ['from a']);
    });

    test('a stream held on one replica is seen from the other, which cannot release it', async (t) => {
      const [a, b] = await pair(t);
      const key = streamKey();
      await a.coordinator.holdStream(key, LONG);
      assert.equal(await b.coordinator.streamHolder(key), a.coordinator.replicaId);
      await b.coordinator.releaseStream(key);
      assert.equal(await b.coordinator.streamHolder(key), a.coordinator.replicaId, 'only the holder releases');
      await a.coordinator.releaseStream(key);
      assert.equal(await b.coordinator.streamHolder(key), undefined);
    });

    test('send reaches the replica it names and no other; broadcast reaches every replica, the sender included', async (t) => {
      const [a, b] = await pair(t);
      const toB = deliver(user(), session(), 'for b');
      const marker = changed(randomUUID());
      await a.coordinator.send(b.coordinator.replicaId, toB);
      await a.coordinator.broadcast(marker);
      // No order is promised between two channels: in a Redis Cluster each PUBLISH may go to
      // another node and reach the subscriber's node over the cluster bus in either order.
      await eventually('the marker on both replicas and the message on b', () =>
        [a, b].every((r) => messages(r).some((m) => m.sessionId === marker.sessionId)) && messages(b).length === 2);
      const bySession = (list: SessionMessage[]) => [...list].sort((x, y) => x.sessionId.localeCompare(y.sessionId));
      assert.deepEqual(bySession(messages(b)), bySession([toB, marker]));
      assert.deepEqual(messages(a), [marker], 'a message sent to b does not reach a');
    });

    test('watchStream delivers the events appended on another replica once it resolves, to every watcher, until unwatched', async (t) => {
      const [a, b] = await pair(t);
      const key = streamKey();
      // Same user: the same shard in a cluster, so one subscriber connection keeps the order.
      const later = streamKey({ userKey: key.userKey });
      const [first, second, other]: [StoredEvent[], StoredEvent[], StoredEvent[]] = [[], [], []];
      const unwatchFirst = await b.coordinator.watchStream(key, (events) => first.push(...events));
      const unwatchSecond = await b.coordinator.watchStream(key, (events) => second.push(...events));
      await a.store!.appendEvents(key, [dataEvent(1), dataEvent(2)], LIMITS);
      await eventually('both watchers to get the events', () => first.length === 2 && second.length === 2);
      assert.deepEqual(first, [dataEvent(1), dataEvent(2)]);
      assert.deepEqual(second, first);

      await unwatchFirst();
      await a.store!.appendEvents(key, [dataEvent(3)], LIMITS);
      await eventually('the remaining watcher to get event 3', () => second.length === 3);
      await unwatchSecond();
      await b.coordinator.watchStream(later, (events) => other.push(...events));
      await a.store!.appendEvents(key, [dataEvent(4)], LIMITS);
      await a.store!.appendEvents(later, [dataEvent(1)], LIMITS);
      await eventually('the event of the stream still watched', () => other.length === 1);
      assert.deepEqual(first.map((e) => e.seq), [1, 2], 'nothing after unwatching');
      assert.deepEqual(second.map((e) => e.seq), [1, 2, 3], 'nothing after unwatching');
      assert.deepEqual(other.map((e) => e.seq), [1], 'only its own stream');
    });
  });
}

coordinatorContract('MemoryCoordinator', () => async () => recording(new MemoryCoordinator()));

/** Replicas of one Redis deployment under a fresh prefix, each with its own store (connection) and coordinator on it, as createState makes them. */
function redisDeployment(endpoint: () => Omit<RedisStoreOptions, 'keyPrefix'>): DeploymentFactory {
  return () => {
    const keyPrefix = `sbcc-${randomUUID()}:`;
    return async (t) => {
      const store = new RedisStore({ ...endpoint(), keyPrefix });
      await store.ready(10_000);
      const replica: Replica = { ...recording(new RedisCoordinator(store.redis, keyPrefix)), store };
      t.after(async () => {
        await replica.coordinator.close();
        await store.close();
      });
      await listening([replica]);
      return replica;
    };
  };
}

/** The contracts on a Redis started for them (a server, or a real 3-master cluster). */
function onRedis<H extends { stop(): Promise<void> }>(name: string, start: () => Promise<H>, endpoint: (handle: H) => Omit<RedisStoreOptions, 'keyPrefix'>): void {
  describe(`${name}-backed`, () => {
    let handle: H | undefined;
    before(async () => {
      handle = await start();
    });
    after(async () => {
      await handle?.stop();
    });
    const deployment = redisDeployment(() => endpoint(handle!));
    coordinatorContract(`RedisCoordinator (${name})`, deployment);
    sharedContract(`RedisCoordinator (${name})`, deployment);
  });
}

onRedis('Redis', startRedis, (server) => ({ url: server.url }));
// Sharded pub/sub for stream events, and the claim script's two keys in one slot (issue 17).
onRedis('Redis Cluster', () => startRedisCluster({ masters: 3 }), (cluster) => ({ mode: 'cluster', nodes: cluster.nodes }));
