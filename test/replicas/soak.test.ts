/**
 * Soak (issue 4): many concurrent sessions spread over three replicas by a round-robin
 * balancer, with a Redis restart in the middle. Bounded in time (SOAK_SECONDS, default 40)
 * and loopback only. Reports requests served, errors seen, sessions lost (target 0) and
 * each replica's memory before and after; asserts that no session was lost and that the
 * gateway served again after Redis came back.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 40);
const SESSIONS = Number(process.env.SOAK_SESSIONS ?? 30);

let redis: RedisHandle;
let oauth: OAuthHandle;
let backend: { url: string; stop(): Promise<void> };
let set: ReplicaSet;

before(async () => {
  [redis, oauth, backend] = await Promise.all([startRedis({ persistent: true }), startOAuthServer(), startResumableBackend()]);
  set = await startReplicas({
    count: 3,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [{ name: 'b', url: backend.url }],
    // The soak drives far more than a person would (hundreds of calls a second): the per-user
    // rate limit stays on, syncing through the Redis restart, but far above that load.
    extra: { limits: { rateLimit: { max: 100_000_000 } } },
  });
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.stop(), oauth?.stop(), redis?.stop()]);
});

function rssMiB(pid: number): number {
  const kib = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  return Math.round((kib / 1024) * 10) / 10;
}

interface Stats {
  served: number;
  stateErrors: number;
  otherErrors: number;
  lost: number;
  servedAfterRestart: number;
}

test(`soak: ${SESSIONS} sessions over 3 replicas for ${SECONDS} s with a Redis restart`, { timeout: (SECONDS + 120) * 1000 }, async (t) => {
  const memoryBefore = set.replicas.map((r) => rssMiB(r.child.pid));
  const stats: Stats = { served: 0, stateErrors: 0, otherErrors: 0, lost: 0, servedAfterRestart: 0 };
  const errorSamples = new Set<string>();
  let turn = 0;
  const nextReplica = () => set.replicas[turn++ % set.replicas.length]!;
  const deadline = Date.now() + SECONDS * 1000;
  let restartedAt = Infinity;

  const runSession = async (n: number) => {
    const token = await oauth.token({ sub: `soak-${n}`, aud: set.audience });
    const base = { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    const init = await fetch(`${nextReplica().url}/mcp/b`, {
      method: 'POST',
      headers: base,
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'soak', version: '1' } } }),
    });
    await init.text();
    const headers = { ...base, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await (await fetch(`${nextReplica().url}/mcp/b`, { method: 'POST', headers, body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' })).text();
    for (let id = 1; Date.now() < deadline; id++) {
      try {
        const res = await fetch(`${nextReplica().url}/mcp/b`, {
          method: 'POST',
          headers,
          signal: AbortSignal.timeout(10_000),
          body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'count', arguments: { steps: 1, intervalMs: 0 } } }),
        });
        const text = await res.text();
        if (res.status === 404) {
          stats.lost++;
          return;
        }
        if (res.status === 200 && text.includes('counted 1')) {
          stats.served++;
          if (Date.now() > restartedAt) stats.servedAfterRestart++;
          continue;
        }
        if (res.status === 503) stats.stateErrors++;
        else stats.otherErrors++;
        errorSamples.add(`${res.status} ${text.slice(0, 120)}`);
      } catch (err) {
        stats.otherErrors++;
        errorSamples.add(String((err as Error).message));
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };

  const restartRedis = async () => {
    await new Promise((resolve) => setTimeout(resolve, (SECONDS * 1000) / 3));
    await redis.restart();
    restartedAt = Date.now();
  };
  await Promise.all([...Array.from({ length: SESSIONS }, (_, n) => runSession(n)), restartRedis()]);

  const memoryAfter = set.replicas.map((r) => rssMiB(r.child.pid));
  const report = { seconds: SECONDS, sessions: SESSIONS, ...stats, errorSamples: [...errorSamples].slice(0, 5), memoryMiB: { before: memoryBefore, after: memoryAfter } };
  t.diagnostic(`soak report: ${JSON.stringify(report)}`);
  process.stderr.write(`soak report: ${JSON.stringify(report, null, 2)}\n`);

  assert.equal(stats.lost, 0, 'no session lost');
  assert.ok(stats.servedAfterRestart > SESSIONS, 'the gateway serves again after Redis came back');
  assert.ok(stats.otherErrors <= stats.served / 100, `errors other than the outage's 503s stay rare: ${[...errorSamples].join(' | ')}`);
});
