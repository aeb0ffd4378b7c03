/**
 * The OTLP export never holds up a call (issue 44 part 1; src/telemetry/span-queue.ts): three
 * gateways on one real redis-server, the real OAuth server and a real SDK backend, differing
 * only in their collector —
 *
 *   healthy   the real OTLP/HTTP receiver (test/fixtures/otlp-receiver.ts): the baseline;
 *   stalled   a local server that accepts connections, reads what is sent and never answers;
 *   refused   a closed port: every connection is refused (the exporter retries it with backoff
 *             until its deadline, so a batch is held there as long as on the stalled one).
 *
 * The same tools/call goes to the three in turn, call after call, so that whatever else the
 * machine does falls on all three alike. Calls through the stalled and the refusing gateway
 * take no longer than through the healthy one (p50 and p90 within a bound relative to it, not
 * a fixed time), and the drops are counted: the stalled gateway holds at most its queue and
 * one batch, every other span is counted — `export_failed` for each batch the collector never
 * answers, `queue_full` beyond the bound — and the refused collector's alike. (The queue's own
 * bound, filled in a moment: span-queue.test.ts.)
 *
 * The queue is set smaller than its defaults (`telemetry.spans`, issue 43: the defaults took
 * 4,440 calls and 39 s of CPU to overflow), so that the same claims need a quarter of the calls;
 * the export timeout is 2 s, so a stalled batch is given up on within the test's calls.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { startTracedBackend, type TracedBackend } from '../fixtures/traced-backend.js';
import { waitUntil } from '../helpers/child.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { sessionClient } from '../helpers/session-client.js';

const KINDS = ['healthy', 'stalled', 'refused'] as const;
type Kind = (typeof KINDS)[number];
/** The gateways' `telemetry.spans`. */
const SPANS = { queueSize: 256, batchSize: 64, exportTimeout: '2s' };
/** Each call makes a SERVER and a CLIENT span: this many calls overflow the stalled gateway's queue and its one batch in flight. */
const CALLS = Math.ceil((SPANS.queueSize + SPANS.batchSize) / 2) + 200;

let redis: RedisHandle | undefined, oauth: OAuthHandle | undefined, backend: TracedBackend | undefined, receiver: FixtureChild | undefined;
let stalling: Server | undefined;
const held = new Set<Socket>();
const gateways = {} as Record<Kind, GatewayHandle>;

/** Accepts every connection, reads it, never answers: a collector that hangs. */
async function startStallingCollector(): Promise<string> {
  stalling = createServer((socket) => {
    held.add(socket);
    socket.on('data', () => {});
    socket.on('close', () => held.delete(socket));
  });
  await new Promise<void>((resolve) => stalling!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(stalling.address() as { port: number }).port}`;
}

before(async () => {
  [redis, oauth, backend, receiver] = await Promise.all([startRedis(), startOAuthServer(), startTracedBackend('legacy'), startFixtureChild('otlp-receiver.ts')]);
  // A port that was free a moment ago, with nothing listening: connections are refused.
  const collectors: Record<Kind, string> = { healthy: receiver.url, stalled: await startStallingCollector(), refused: `http://127.0.0.1:${await freePort()}` };
  for (const kind of KINDS) {
    gateways[kind] = await startGateway({
      issuer: oauth.issuer,
      redisUrl: redis.url,
      backends: [{ name: 'weather', url: backend.url, protocol: '2025-11-25' }],
      // The calls come faster than the default per-user rate limit allows.
      overrides: { telemetry: { otlp: { endpoint: collectors[kind] }, sampling: { ratio: 1 }, spans: SPANS }, limits: { rateLimit: { max: 1_000_000 } } },
    });
  }
});

after(async () => {
  // The stalled collector still holds the gateway's export: let the close end it.
  for (const s of held) s.destroy();
  await Promise.allSettled(KINDS.map((k) => gateways[k]?.close()));
  stalling?.close();
  await Promise.allSettled([redis?.stop(), oauth?.stop(), backend?.close(), receiver?.child.stop()]);
});

/** The value of `switchboard_telemetry_spans_dropped_total{reason}` on a gateway's /metrics. */
async function dropped(gateway: GatewayHandle, reason: string): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`switchboard_telemetry_spans_dropped_total{reason="${reason}"}`));
  return line ? Number(line.split(' ').at(-1)) : NaN;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

test('a stalled or refusing collector adds no latency to calls, and the spans it could not take are counted as dropped', async () => {
  const clients = {} as Record<Kind, { token: string; session: string; call: (id: number) => Promise<Response> }>;
  for (const kind of KINDS) {
    const gw = gateways[kind];
    const client = sessionClient(() => gw.endpoint('weather'), `stall-${kind}`);
    const token = await oauth!.token({ sub: 'alice', aud: gw.audience, scope: 'mcp' });
    const session = await client.initialize(token);
    clients[kind] = { token, session, call: (id) => client.post(token, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'weather', arguments: {} } }, session) };
  }
  const latencies = Object.fromEntries(KINDS.map((k) => [k, [] as number[]])) as Record<Kind, number[]>;
  for (let i = 0; i < CALLS; i++) {
    // The order rotates, so that no gateway always goes first.
    for (const kind of KINDS.map((_, j) => KINDS[(i + j) % KINDS.length]!)) {
      const started = performance.now();
      const res = await clients[kind].call(i + 10);
      const text = await res.text();
      latencies[kind].push(performance.now() - started);
      assert.equal(res.status, 200, `${kind} call ${i}: ${text}`);
      assert.match(text, /sunny/);
    }
  }
  const sorted = Object.fromEntries(KINDS.map((k) => [k, [...latencies[k]].sort((a, b) => a - b)])) as Record<Kind, number[]>;
  const figures = Object.fromEntries(KINDS.map((k) => [k, { p50: percentile(sorted[k], 50), p90: percentile(sorted[k], 90) }]));
  for (const kind of ['stalled', 'refused'] as const) {
    // Twice the baseline, the margin for a shared machine; an export in the call's way would be
    // seconds (the exporter's timeout), or the connect of every call.
    assert.ok(figures[kind]!.p50 <= 2 * figures.healthy!.p50, `${kind} p50 within 2× healthy's: ${JSON.stringify(figures)}`);
    assert.ok(figures[kind]!.p90 <= 2 * figures.healthy!.p90, `${kind} p90 within 2× healthy's: ${JSON.stringify(figures)}`);
  }
  // Stalled: at most the queue and one batch in flight are held; every other span is counted —
  // beyond the queue's bound (queue_full), or in a batch the collector never answered within the
  // export timeout (export_failed; then the next batch goes, and stalls in turn).
  // Refused: the same, though how many fall to each reason depends on how fast the calls came
  // while the exporter retried its batch (a CI run once filled the queue with 60 to spare).
  const spans = 2 * CALLS;
  const bound = spans - SPANS.queueSize - SPANS.batchSize;
  for (const kind of ['stalled', 'refused'] as const) {
    const counted = { queueFull: await dropped(gateways[kind], 'queue_full'), exportFailed: await dropped(gateways[kind], 'export_failed') };
    assert.ok(counted.queueFull + counted.exportFailed >= bound, `${kind}: all but a queue and a batch of ${spans} spans counted dropped: ${JSON.stringify(counted)}`);
  }
  // And the refused batches themselves are counted once the exporter gives up on them.
  await waitUntil(async () => ((await dropped(gateways.refused, 'export_failed')) >= SPANS.batchSize ? true : undefined), { what: 'export_failed counted on the refusing gateway', timeoutMs: 30_000, intervalMs: 200 });
  // The healthy one drops nothing.
  assert.equal(await dropped(gateways.healthy, 'queue_full'), 0);
  assert.equal(await dropped(gateways.healthy, 'export_failed'), 0);
});
