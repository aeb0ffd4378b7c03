/**
 * The coordinator's pub/sub connection across a reconnect (src/state/redis-connection.ts
 * `subscriberFor`, src/state/redis-coordinator.ts), on a real redis-server behind a TCP
 * proxy that can cut every connection and hold Redis' answers back:
 * - after the connection is cut, the replica's inbox, the broadcast channel and a watched
 *   stream's channel receive again (the coordinator subscribes them again itself);
 * - closing the coordinator while that SUBSCRIBE is unanswered raises no unhandled
 *   rejection. ioredis' own resubscribe did (CI, session 31: "Connection is closed."), and
 *   in a replica an unhandled rejection ends the process.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test, type TestContext } from 'node:test';
import type { ReplicaMessage } from '../../src/state/coordinator.js';
import { RedisCoordinator } from '../../src/state/redis-coordinator.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { StoredEvent, StreamKey } from '../../src/state/store.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

let redis: RedisHandle;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
});

interface CuttingProxy {
  url: string;
  /** Closes every connection through the proxy now; the clients reconnect. */
  cutAll(): void;
  /** From now on, a new connection that sends SUBSCRIBE gets no answer to it, or to anything after. */
  holdSubscribeAnswers(): void;
  /** Connections whose answers are being held. */
  held(): number;
  close(): Promise<void>;
}

async function cuttingProxy(port: number): Promise<CuttingProxy> {
  let holding = false;
  let held = 0;
  const proxy = await startTcpProxy(port, () => {
    let silent = false;
    return {
      fromClient(chunk, { upstream }) {
        if (holding && !silent && chunk.toString('latin1').toLowerCase().includes('subscribe')) {
          silent = true;
          held++;
        }
        upstream.write(chunk);
      },
      fromUpstream(chunk, { client }) {
        if (!silent) client.write(chunk);
      },
    };
  });
  return {
    url: `redis://127.0.0.1:${proxy.port}`,
    cutAll: proxy.cutAll,
    holdSubscribeAnswers: () => (holding = true),
    held: () => held,
    close: proxy.close,
  };
}

interface Rig {
  proxy: CuttingProxy;
  store: RedisStore;
  coordinator: RedisCoordinator;
  messages: ReplicaMessage[];
  events: StoredEvent[];
  key: StreamKey;
}

/** A store and coordinator through the proxy, listening on its inbox, the broadcast channel and one stream. */
async function open(t: TestContext): Promise<Rig> {
  const proxy = await cuttingProxy(redis.port);
  t.after(() => proxy.close());
  const store = new RedisStore({ url: proxy.url, keyPrefix: `sbr-${randomUUID()}:`, unavailableWaitMs: 5_000 });
  t.after(() => store.close());
  await store.ready(10_000);
  const coordinator = new RedisCoordinator(store.redis, store.keyPrefix, store.waits);
  t.after(() => coordinator.close());
  const messages: ReplicaMessage[] = [];
  coordinator.onMessage((message) => messages.push(message));
  const events: StoredEvent[] = [];
  const key: StreamKey = { userKey: `u-${randomUUID()}`, sessionId: 's', streamId: 'st' };
  await coordinator.watchStream(key, (batch) => events.push(...batch));
  return { proxy, store, coordinator, messages, events, key };
}

/** Waits until a broadcast, a message to this replica and an appended event all arrive. */
async function allChannelsReceive(rig: Rig, seq: number): Promise<void> {
  const marker = randomUUID();
  await waitUntil(
    async () => {
      await rig.coordinator.broadcast({ type: 'changed', userKey: 'probe', sessionId: `b-${marker}` });
      await rig.coordinator.send(rig.coordinator.replicaId, { type: 'changed', userKey: 'probe', sessionId: `i-${marker}` });
      if (!rig.events.some((e) => e.seq === seq)) await rig.store.appendEvents(rig.key, [seq === 0 ? { seq, meta: { kind: 'post', requestIds: [0] } } : { seq, data: `{"n":${seq}}` }], { maxEvents: 100, ttlMs: 60_000 });
      await sleep(50);
      const got = (id: string) => rig.messages.some((m) => 'sessionId' in m && m.sessionId === id);
      return got(`b-${marker}`) && got(`i-${marker}`) && rig.events.some((e) => e.seq === seq) ? true : undefined;
    },
    { what: `the broadcast, the inbox and the stream channel to receive (event ${seq})`, timeoutMs: 10_000, intervalMs: 100 },
  );
}

describe('the coordinator subscriber, when its connection is cut', () => {
  test('the inbox, the broadcast channel and a watched stream receive again after the reconnect', async (t) => {
    const rig = await open(t);
    await allChannelsReceive(rig, 0);
    rig.proxy.cutAll();
    await allChannelsReceive(rig, 1);
    rig.proxy.cutAll();
    await allChannelsReceive(rig, 2);
  });

  test('closed while its SUBSCRIBE after the reconnect is unanswered: no unhandled rejection', async (t) => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    t.after(() => process.off('unhandledRejection', onRejection));
    const rig = await open(t);
    await allChannelsReceive(rig, 0);

    rig.proxy.holdSubscribeAnswers();
    rig.proxy.cutAll();
    await waitUntil(async () => (rig.proxy.held() > 0 ? true : undefined), { what: 'the SUBSCRIBE sent after the reconnect', timeoutMs: 10_000, intervalMs: 20 });
    await rig.coordinator.close();
    await rig.store.close();
    await sleep(300);
    assert.deepEqual(
      rejections.map((r) => String(r)),
      [],
    );
  });
});
