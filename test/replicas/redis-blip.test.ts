/**
 * A Redis blip fails no call (issue 45 §1; src/state/store-waits.ts): two gateway replicas
 * (the real CLI, `redis.unavailableWait` at its default 5 s) on a real redis-server, SDK
 * clients in a small closed loop through a round-robin balancer — each opens a session,
 * calls a tool whose answer streams (so its events go to the replay log), calls it again
 * and ends the session — while the gateways' Redis connections are killed every 300 ms
 * (`CLIENT KILL TYPE normal`, and the pub/sub ones every other time). Every call succeeds,
 * and the replicas count the operations that waited (`switchboard_store_waits_total`).
 * A few seconds, loopback only.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { commandOnce } from '../helpers/redis-processes.js';
import { startReplicas, storeWaits, type ReplicaSet } from '../helpers/replicas.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';

const SECONDS = Number(process.env.BLIP_SECONDS ?? 6);
const WORKERS = 4;
const KILL_EVERY_MS = 300;

let redis: RedisHandle;
let oauth: OAuthHandle;
let backend: { url: string; stop(): Promise<void> };
let set: ReplicaSet;

before(async () => {
  [redis, oauth, backend] = await Promise.all([startRedis(), startOAuthServer(), startResumableBackend()]);
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [{ name: 'b', url: backend.url }],
    // The loop calls far faster than a person would; the per-user rate limit stays on, far above it.
    extra: { limits: { rateLimit: { max: 100_000_000 } } },
  });
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.stop(), oauth?.stop(), redis?.stop()]);
});

test(`SDK calls through two replicas while their Redis connections are killed every ${KILL_EVERY_MS} ms: none fails`, { timeout: (SECONDS + 60) * 1000 }, async (t) => {
  const token = await oauth.token({ sub: 'blip-user', aud: set.audience });
  const deadline = Date.now() + SECONDS * 1000;
  const failures: string[] = [];
  let calls = 0;
  let sessions = 0;
  let kills = 0;

  const killer = (async () => {
    for (let n = 0; Date.now() < deadline; n++) {
      await new Promise((resolve) => setTimeout(resolve, KILL_EVERY_MS));
      kills += Number(await commandOnce(redis.port, 'CLIENT', 'KILL', 'TYPE', 'normal'));
      if (n % 2) kills += Number(await commandOnce(redis.port, 'CLIENT', 'KILL', 'TYPE', 'pubsub'));
    }
  })();

  const worker = async (w: number) => {
    while (Date.now() < deadline) {
      const client = new Client({ name: `blip-${w}`, version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}/mcp/b`), {
        fetch: set.roundRobinFetch(),
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      });
      const step = async (what: string, run: () => Promise<unknown>): Promise<boolean> => {
        try {
          await run();
          calls++;
          return true;
        } catch (err) {
          failures.push(`${what}: ${(err as Error).message}`);
          return false;
        }
      };
      if (!(await step('connect', () => client.connect(transport)))) {
        await client.close().catch(() => {});
        continue;
      }
      sessions++;
      for (let i = 0; i < 2; i++) {
        await step('tools/call', async () => {
          const result = await client.callTool({ name: 'count', arguments: { steps: 2, intervalMs: 5 } }, undefined, { onprogress: () => {}, timeout: 15_000 });
          assert.match(JSON.stringify(result.content), /counted 2/);
        });
      }
      await step('DELETE', () => transport.terminateSession());
      await client.close().catch(() => {});
    }
  };
  await Promise.all([killer, ...Array.from({ length: WORKERS }, (_, w) => worker(w))]);

  const waits = await storeWaits(set.replicas);
  t.diagnostic(`${calls} calls in ${sessions} sessions over ${SECONDS} s, ${kills} connections killed; store waits ${JSON.stringify(waits)}; failures: ${failures.length}`);
  assert.ok(kills >= SECONDS * 2, `connections were killed (${kills})`);
  assert.ok(calls >= 20, `the loop ran (${calls} calls)`);
  assert.deepEqual(failures, [], `no call failed (${failures.length} of ${calls + failures.length})`);
  assert.ok((waits.served ?? 0) > 0, `operations waited for Redis and were served: ${JSON.stringify(waits)}`);
  assert.equal(waits.refused ?? 0, 0);
});
