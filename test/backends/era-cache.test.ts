/**
 * BackendEras (src/backends/era.ts): each backend's era found once per deployment — one probe
 * for concurrent callers on a replica, one for all replicas through the shared store (memory
 * and a real Redis), none when `protocol` is pinned — and found again after `forget` or expiry.
 * The backends are real SDK servers (test/fixtures/era-backends.ts).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { BackendEras, DEFAULT_TTL_MS, type BackendErasOptions } from '../../src/backends/era.js';
import { StreamableHttpBackend } from '../../src/backends/streamable-http.js';
import { parseConfig } from '../../src/config/load.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { StateStore } from '../../src/state/store.js';
import { ValueKeys } from '../../src/state/value-keys.js';
import { startEraBackend, type EraBackend, type EraBackendKind } from '../fixtures/era-backends.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const log = pino({ level: 'silent' }) as unknown as FastifyBaseLogger;

/** A shared store as two replicas see it: one connection each (Redis) or the one instance (memory). */
interface SharedStore {
  replicas: [StateStore, StateStore];
  close(): Promise<void>;
}

const opened: Array<{ close(): Promise<void> }> = [];
after(async () => {
  for (const o of opened.reverse()) await o.close();
});

async function start(kind: EraBackendKind, options: { token?: string; port?: number } = {}): Promise<EraBackend> {
  const b = await startEraBackend(kind, options);
  opened.push(b);
  return b;
}

function backendFor(server: { url: string }, more: Record<string, unknown> = {}): StreamableHttpBackend {
  const name = `b-${randomUUID().slice(0, 8)}`;
  const config = parseConfig({ publicUrl: 'http://127.0.0.1:1', auth: { issuer: 'https://idp.example.com', audience: 'a' }, backends: [{ name, url: server.url, ...more }] });
  const backend = new StreamableHttpBackend(config.backends[0]!);
  opened.push(backend);
  return backend;
}

/** The same backend as another replica has it: same name and config, its own client. */
function sameBackend(backend: StreamableHttpBackend): StreamableHttpBackend {
  const other = new StreamableHttpBackend(backend.config);
  opened.push(other);
  return other;
}

function eraCacheSuite(label: string, open: () => Promise<SharedStore>): void {
  describe(`BackendEras on the ${label} store`, () => {
    let shared: SharedStore;
    /** A replica's BackendEras, on the first or the second replica's store connection. */
    const eras = (replica: 0 | 1 = 0, options?: BackendErasOptions) => new BackendEras(shared.replicas[replica], log, options);

    before(async () => {
      shared = await open();
    });
    after(() => shared.close());

    test('two replicas: the first probes, the second finds the era in the store', async () => {
      const server = await start('modern');
      const backend = backendFor(server);
      const first = await eras().eraOf(backend);
      assert.equal(first?.era, '2026-07-28');
      assert.deepEqual(first?.discover?.supportedVersions, ['2026-07-28']);
      const second = await eras(1).eraOf(sameBackend(backend));
      assert.deepEqual(second, first);
      assert.equal(server.discoverCount(), 1);
    });

    test('callers on one replica at once share one probe, and later ones none', async () => {
      const server = await start('legacy');
      const backend = backendFor(server);
      const replica = eras();
      const all = await Promise.all(Array.from({ length: 5 }, () => replica.eraOf(backend)));
      for (const info of all) assert.deepEqual(info, { era: '2025-11-25' });
      assert.deepEqual(await replica.eraOf(backend), { era: '2025-11-25' });
      assert.equal(server.discoverCount(), 1);
    });

    test('a pinned protocol, or a bridged transport, is never probed', async () => {
      const server = await start('modern');
      const replica = eras();
      assert.deepEqual(await replica.eraOf(backendFor(server, { protocol: '2025-11-25' })), { era: '2025-11-25' });
      assert.deepEqual(await replica.eraOf(backendFor(server, { protocol: '2026-07-28' })), { era: '2026-07-28' });
      assert.deepEqual(await replica.eraOf(backendFor(server, { transport: 'sse' })), { era: '2025-11-25' });
      assert.equal(server.seen.length, 0);
    });

    test('401 decides nothing and is not remembered; the caller\'s authorization gets the era', async () => {
      const server = await start('dual', { token: 'tok' });
      const backend = backendFor(server);
      const replica = eras();
      assert.equal(await replica.eraOf(backend), undefined);
      assert.equal(await shared.replicas[1].getValue(ValueKeys.backendEra(backend.name)), undefined);
      // One caller without a token and one with it, at once: the second is not refused for the first.
      const [without, withToken] = await Promise.all([replica.eraOf(backend), replica.eraOf(backend, 'Bearer tok')]);
      assert.equal(without, undefined);
      assert.equal(withToken?.era, '2026-07-28');
      assert.equal((await eras(1).eraOf(sameBackend(backend)))?.era, '2026-07-28', 'found with one user\'s token, it holds for all');
    });

    test('401 to the caller\'s own token is a refusal of that token, not of the backend; another token at the same time still gets the era', async () => {
      const server = await start('dual', { token: 'tok' });
      const backend = backendFor(server);
      const replica = eras();
      const [wrong, right] = await Promise.all([replica.eraOf(backend, 'Bearer wrong'), replica.eraOf(backend, 'Bearer tok')]);
      assert.deepEqual(wrong, { refused: true });
      assert.equal(right?.era, '2026-07-28');
    });

    test('forget: the backend was downgraded; the next call probes again and every replica then sees it', async () => {
      const modern = await start('modern');
      const backend = backendFor(modern);
      const a = eras();
      const b = eras(1);
      assert.equal((await a.eraOf(backend))?.era, '2026-07-28');
      const port = Number(new URL(modern.url).port);
      await modern.close();
      const legacy = await start('legacy', { port });
      assert.equal((await a.eraOf(backend))?.era, '2026-07-28', 'still the era it knows');
      a.forget(backend.name);
      assert.deepEqual(await a.eraOf(backend), { era: '2025-11-25' });
      assert.equal(legacy.discoverCount(), 1);
      assert.deepEqual(await b.eraOf(sameBackend(backend)), { era: '2025-11-25' });
      assert.equal(legacy.discoverCount(), 1);
    });

    test('forget while a probe runs: its answer is returned but not kept', async () => {
      const server = await start('modern');
      const backend = backendFor(server);
      const replica = eras();
      const running = replica.eraOf(backend);
      replica.forget(backend.name);
      assert.equal((await running)?.era, '2026-07-28');
      assert.equal((await replica.eraOf(backend))?.era, '2026-07-28');
      assert.equal(server.discoverCount(), 2);
    });

    test('an era expires after its TTL, in memory and in the store', async () => {
      const server = await start('modern');
      const backend = backendFor(server);
      let now = Date.now();
      const clock = () => now;
      const a = eras(0, { now: clock });
      await a.eraOf(backend);
      now += DEFAULT_TTL_MS - 1_000;
      await a.eraOf(backend);
      await eras(1, { now: clock }).eraOf(sameBackend(backend));
      assert.equal(server.discoverCount(), 1);
      now += 2_000;
      await a.eraOf(backend);
      assert.equal(server.discoverCount(), 2);
      await eras(1, { now: clock }).eraOf(sameBackend(backend));
      assert.equal(server.discoverCount(), 2, 'the fresh record is shared again');
    });
  });
}

eraCacheSuite('memory', async () => {
  const store = new MemoryStore();
  return { replicas: [store, store], close: () => store.close() };
});

let redis: RedisHandle | undefined;
eraCacheSuite('Redis', async () => {
  redis = await startRedis();
  const keyPrefix = `sb-era-${randomUUID().slice(0, 8)}:`;
  const stores = [new RedisStore({ url: redis.url, keyPrefix }), new RedisStore({ url: redis.url, keyPrefix })] as [RedisStore, RedisStore];
  for (const store of stores) await store.ready(10_000);
  return {
    replicas: stores,
    close: async () => {
      for (const store of stores) await store.close();
      await redis?.stop();
    },
  };
});
