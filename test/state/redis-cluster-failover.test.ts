/**
 * A Redis Cluster master lost (issue 17): a real cluster of 3 masters with a replica each
 * (test/helpers/redis-cluster.ts). The master owning a user's slot is killed (SIGKILL);
 * until the cluster has promoted its replica, the store's operations on that user fail
 * promptly (never hang), and afterwards the same store object serves the user's session and
 * replay log as they were replicated, and ping sees `cluster_state:ok` again.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { RedisStore } from '../../src/state/redis-store.js';
import { waitUntil } from '../helpers/child.js';
import { commandOnce } from '../helpers/redis-processes.js';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';

let cluster: RedisClusterHandle;

before(async () => {
  cluster = await startRedisCluster({ masters: 3, replicas: 1 });
});

after(async () => {
  await cluster?.stop();
});

/** Every operation must settle within this, error or not. */
const SETTLE_MS = 6_000;
const WINDOW_MS = 30_000;

test('the master of a user is killed: prompt errors until its replica is promoted, then the session and its replay log are there', async (t) => {
  const store = new RedisStore({ mode: 'cluster', nodes: cluster.nodes, keyPrefix: `sbfo-${randomUUID()}:` });
  t.after(() => store.close());
  await store.ready(10_000);
  const user = `user-${randomUUID()}`;
  const key = { userKey: user, sessionId: 's1', streamId: 'st1' };
  await store.createSession(user, 's1', { backend: 'b', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 1 }, 600_000);
  await store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }, { seq: 1, data: '{"n":1}' }], { maxEvents: 10, ttlMs: 600_000 });

  // The master that owns the user's slot, and the replica it has synced to.
  const slot = Number(await store.redis.cluster('KEYSLOT', `${store.keyPrefix}${store.keys.session(user, 's1')}`));
  const owner = (await store.redis.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to)![2]![1];
  const master = cluster.processes.find((p) => p.port === owner)!;
  assert.equal(await commandOnce(master.port, 'WAIT', '1', '1000'), 1, 'the replica has every write');
  await master.kill();
  const killedAt = Date.now();

  const outcomes: string[] = [];
  let okInARow = 0;
  while (okInARow < 3 && Date.now() - killedAt < WINDOW_MS) {
    const started = Date.now();
    const outcome = await Promise.race([
      store.touchSession(user, 's1', 600_000).then(
        (record) => (record ? 'ok' : 'lost'),
        (err: Error) => `error: ${err.message}`,
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve('hung'), SETTLE_MS).unref()),
    ]);
    outcomes.push(`${started - killedAt} ms: ${outcome} (${Date.now() - started} ms)`);
    assert.notEqual(outcome, 'hung', `an operation hung during the failover:\n${outcomes.join('\n')}`);
    assert.notEqual(outcome, 'lost', 'the replicated session is not lost');
    okInARow = outcome === 'ok' ? okInARow + 1 : 0;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.equal(okInARow, 3, `the store serves the user again within ${WINDOW_MS} ms:\n${outcomes.join('\n')}`);
  assert.ok(outcomes.some((o) => o.includes('error')), 'the window was seen (an operation failed while the master was gone)');
  assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 1], 'the replay log was replicated');
  await store.appendEvents(key, [{ seq: 2, data: '{"n":2}' }], { maxEvents: 10, ttlMs: 600_000 });
  assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 1, 2]);
  await store.ping();
  t.diagnostic(`cluster failover: served again ${outcomes.at(-3)}`);
});

test('with redis.unavailableWait, operations issued while the master is gone wait for the promotion and succeed (issue 45 §1)', async (t) => {
  const store = new RedisStore({ mode: 'cluster', nodes: cluster.nodes, keyPrefix: `sbfw-${randomUUID()}:`, unavailableWaitMs: 20_000 });
  t.after(() => store.close());
  await store.ready(10_000);
  const waits: string[] = [];
  store.waits.observe((outcome, seconds) => waits.push(`${outcome} ${seconds.toFixed(2)} s`));
  // A user on a master that still has a replica (the test above left one master without). Under
  // load the cluster may list no replica for a while after that failover (a CI run spun here for
  // 12 minutes when this looked at one CLUSTER SLOTS for ever): look again until one is listed.
  let seen: unknown;
  const { user, owner } = await waitUntil(
    async () => {
      const slots = await store.redis.cluster('SLOTS');
      seen = slots.map((range) => `${range[0]}-${range[1]}: ${range.length - 2} node(s)`);
      if (!slots.some((range) => range.length > 3)) return undefined;
      for (let tries = 0; tries < 200; tries++) {
        const candidate = `user-${randomUUID()}`;
        const slot = Number(await store.redis.cluster('KEYSLOT', `${store.keyPrefix}${store.keys.session(candidate, 's1')}`));
        const range = slots.find(([from, to]) => slot >= from && slot <= to);
        if (range && range.length > 3) return { user: candidate, owner: range[2]![1] };
      }
      return undefined;
    },
    { what: 'a master with a replica in CLUSTER SLOTS', details: () => `last seen: ${JSON.stringify(seen)}`, timeoutMs: 60_000, intervalMs: 500 },
  );
  const key = { userKey: user, sessionId: 's1', streamId: 'st1' };
  await store.createSession(user, 's1', { backend: 'b', protocolVersion: '2025-11-25', clientCapabilities: {}, createdAt: 1 }, 600_000);
  await store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [1] } }], { maxEvents: 10, ttlMs: 600_000 });
  const master = cluster.processes.find((p) => p.port === owner)!;
  assert.equal(await commandOnce(master.port, 'WAIT', '1', '1000'), 1, 'the replica has every write');
  await master.kill();
  const killedAt = Date.now();

  // Issued while the master is gone, before the cluster has noticed: every one waits, none fails.
  const results = await Promise.allSettled([
    store.touchSession(user, 's1', 600_000),
    store.readEvents(key),
    store.appendEvents(key, [{ seq: 1, data: '{"n":1}' }], { maxEvents: 10, ttlMs: 600_000 }),
  ]);
  const took = Date.now() - killedAt;
  t.diagnostic(`served ${took} ms after the kill; waits: ${waits.join(', ')}`);
  assert.deepEqual(
    results.map((r) => (r.status === 'rejected' ? `error: ${(r.reason as Error).message}` : 'ok')),
    ['ok', 'ok', 'ok'],
  );
  assert.equal((results[0] as PromiseFulfilledResult<unknown>).value !== undefined, true, 'the replicated session is there');
  assert.deepEqual((await store.readEvents(key)).map((e) => e.seq), [0, 1], 'the append landed once');
});
