/**
 * The oidc-provider storage adapter on the state store (src/broker/store-adapter.ts), against
 * the memory store and a real Redis (both implement the StateStore contract): records with
 * their TTLs, single use across replicas (two adapters on one store stand for two replicas),
 * revocation by grant, sessions by uid, registered clients, and documents for URL client ids.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import type { Adapter } from 'oidc-provider';
import { createStoreAdapter, keepClient, registeredClientName } from '../../src/broker/store-adapter.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { RedisKeys } from '../../src/state/redis-keys.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { StateStore } from '../../src/state/store.js';
import { ValueKeys } from '../../src/state/value-keys.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let redis: RedisHandle;
/** A plain client on the same Redis, to read what the store wrote (PTTL). */
let raw: Redis;
before(async () => {
  redis = await startRedis();
  raw = new Redis(redis.url);
});
after(async () => {
  raw?.disconnect();
  await redis?.stop();
});

const now = () => Math.floor(Date.now() / 1000);
/** A registered client's life until it obtains a token (auth.broker.registrationLimits.unusedClientTtl), short for the test. */
const UNUSED_CLIENT_TTL_MS = 1_500;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

for (const kind of ['memory', 'redis'] as const) {
  describe(`store adapter on the ${kind} store`, () => {
    let store: StateStore;
    const resolved: string[] = [];
    /** One adapter factory per replica, both on the same store. */
    let replicaA: (model: string) => Adapter;
    let replicaB: (model: string) => Adapter;

    before(async () => {
      store = kind === 'memory' ? new MemoryStore() : new RedisStore({ url: redis.url, keyPrefix: 'broker-adapter-test:' });
      if (store instanceof RedisStore) await store.ready();
      const options = {
        clientTtlMs: 60_000,
        unusedClientTtlMs: UNUSED_CLIENT_TTL_MS,
        resolveClientUrl: async (id: string) => {
          resolved.push(id);
          return { client_id: id, redirect_uris: ['https://client.example/cb'] };
        },
      };
      replicaA = createStoreAdapter(store, options);
      replicaB = createStoreAdapter(store, options);
    });
    after(() => store?.close());

    test('a record comes back on another replica until it is destroyed', async () => {
      await replicaA('Interaction').upsert('i1', { uid: 'i1', exp: now() + 60 }, 60);
      assert.equal((await replicaB('Interaction').find('i1'))?.uid, 'i1');
      await replicaB('Interaction').destroy('i1');
      assert.equal(await replicaA('Interaction').find('i1'), undefined);
    });

    test('a refresh token is used once: the second use, on another replica, ends its grant', async () => {
      await replicaA('Grant').upsert('g1', { accountId: 'alice', exp: now() + 600 }, 600);
      await replicaA('RefreshToken').upsert('rt1', { grantId: 'g1', exp: now() + 600 }, 600);
      await replicaA('RefreshToken').consume('rt1');
      assert.ok((await replicaB('RefreshToken').find('rt1'))?.consumed, 'every replica sees it consumed');
      await assert.rejects(replicaB('RefreshToken').consume('rt1'), (err: { error?: string }) => err.error === 'invalid_grant');
      assert.equal(await replicaA('Grant').find('g1'), undefined, 'the grant is over');
    });

    test('revoking by grant deletes the grant, which every code and refresh token needs', async () => {
      await replicaA('Grant').upsert('g2', { accountId: 'bob', exp: now() + 600 }, 600);
      await replicaB('AccessToken').revokeByGrantId('g2');
      assert.equal(await replicaA('Grant').find('g2'), undefined);
    });

    test('a session is found by its uid', async () => {
      await replicaA('Session').upsert('s1', { uid: 'u1', accountId: 'carol', exp: now() + 60 }, 60);
      assert.equal((await replicaB('Session').findByUid('u1'))?.accountId, 'carol');
      await replicaB('Session').destroy('s1');
      assert.equal(await replicaA('Session').findByUid('u1'), undefined);
    });

    test('a registered client is found on every replica; a URL client id is a metadata document', async () => {
      // oidc-provider registers a client with no TTL (its types say otherwise).
      await replicaA('Client').upsert('c1', { client_id: 'c1', redirect_uris: ['https://client.example/cb'] }, undefined as never);
      assert.equal((await replicaB('Client').find('c1'))?.client_id, 'c1');
      assert.equal(await replicaB('Client').find('unknown'), undefined);
      assert.deepEqual(resolved, []);
      const doc = 'https://client.example/metadata.json';
      assert.equal((await replicaB('Client').find(doc))?.client_id, doc);
      assert.deepEqual(resolved, [doc]);
    });

    test('a registered client\'s name, as the approval page reads it (issue 46 §3): no fetch, no TTL slide', async () => {
      await replicaA('Client').upsert('named', { client_id: 'named', client_name: '  Claude <img src=x>  ', redirect_uris: ['https://client.example/cb'] }, undefined as never);
      await replicaA('Client').upsert('nameless', { client_id: 'nameless', redirect_uris: ['https://client.example/cb'] }, undefined as never);
      assert.equal(await registeredClientName(store, 'named'), 'Claude <img src=x>', 'as registered (the page escapes it), trimmed');
      assert.equal(await registeredClientName(store, 'nameless'), undefined);
      assert.equal(await registeredClientName(store, 'unknown'), undefined);
      const before = resolved.length;
      assert.equal(await registeredClientName(store, 'https://client.example/other.json'), undefined, 'a URL client id is not resolved for a name');
      assert.equal(resolved.length, before);
    });

    test('a registered client that obtains no token is forgotten after unusedClientTtl; one that does is kept clientTtl (issue 28 §4)', async () => {
      const registered = Date.now();
      for (const id of ['c-unused', 'c-used']) await replicaA('Client').upsert(id, { client_id: id, redirect_uris: ['https://client.example/cb'] }, undefined as never);
      await keepClient(store, 'c-used', 60_000);
      if (kind === 'redis') {
        const pttl = (id: string) => raw.pttl(`broker-adapter-test:${new RedisKeys(false).value(ValueKeys.brokerRecord('Client', id))}`);
        const unused = await pttl('c-unused');
        assert.ok(unused > 0 && unused <= UNUSED_CLIENT_TTL_MS, `Redis forgets the unused client within unusedClientTtl (PTTL ${unused} ms)`);
        assert.ok((await pttl('c-used')) > 50_000, 'the used one lives clientTtl');
      }
      const deadline = registered + UNUSED_CLIENT_TTL_MS + 3_000;
      while ((await replicaB('Client').find('c-unused')) !== undefined) {
        assert.ok(Date.now() < deadline, 'the unused client outlived unusedClientTtl by 3 s');
        await sleep(100);
      }
      assert.equal((await replicaB('Client').find('c-used'))?.client_id, 'c-used', 'the client that obtained a token is still there');
      await keepClient(store, 'c-used', 60_000);
      assert.equal((await replicaA('Client').find('c-used'))?.client_id, 'c-used', 'keeping it again changes nothing');
    });

    test('an expiring record is written with its TTL', async () => {
      // Read where it is kept, not through the adapter: a record hidden by `find` but kept
      // without a TTL would still fill the store (issue 28 §8).
      const key = ValueKeys.brokerRecord('AuthorizationCode', 'code1');
      const written = Date.now();
      const since = performance.now();
      await replicaA('AuthorizationCode').upsert('code1', { grantId: 'g3', exp: now() + 2 }, 2);
      if (kind === 'redis') {
        const pttl = await raw.pttl(`broker-adapter-test:${new RedisKeys(false).value(key)}`);
        // No less than what is left of 2 s after the time since the write (a loaded machine can stall for a second).
        const elapsed = performance.now() - since;
        assert.ok(pttl > 2_000 - elapsed - 100 && pttl <= 2_000, `Redis expires the record in 2 s (PTTL ${pttl} ms, ${elapsed.toFixed(0)} ms after the write)`);
      }
      await sleep(1_000 - (Date.now() - written));
      assert.notEqual(await store.getValue(key), undefined, 'still kept one second into its two');
      const deadline = written + 5_000;
      while ((await store.getValue(key)) !== undefined) {
        assert.ok(Date.now() < deadline, 'the store still holds the record 3 s after its TTL');
        await sleep(100);
      }
      assert.ok(Date.now() - written >= 1_900, 'gone when its TTL ran out, not before');
    });
  });
}
