/**
 * The session phases of `npm run bench`, on the default-configuration gateway: the cost of a
 * new session (initialize + initialized, one at a time, alternating with the direct path),
 * Redis memory per stored session, and gateway memory per idle standalone SSE stream.
 */
import type { Redis } from 'ioredis';
import { attachInspector } from './inspector.js';
import { createPool, openSession, percentiles, type Path } from './load.js';
import type { Gateway } from './processes.js';
import { log, sleep } from './sampling.js';
import { closeAll, openIdleStreams, type StreamRequest } from './streams.js';
import { processRssBytes, redisInfoField } from './system.js';

type SessionPath = Pick<Path, 'pool' | 'path' | 'headers'>;

export async function measureNewSessions(n: number, direct: SessionPath, gateway: SessionPath) {
  const times = { direct: [] as number[], gateway: [] as number[] };
  for (let i = 0; i < n; i++) {
    for (const which of i % 2 === 0 ? (['direct', 'gateway'] as const) : (['gateway', 'direct'] as const)) {
      const p = which === 'direct' ? direct : gateway;
      const t0 = performance.now();
      await openSession(p.pool, p.path, p.headers);
      times[which].push(performance.now() - t0);
    }
  }
  const d = percentiles(Float64Array.from(times.direct), [50, 99]);
  const g = percentiles(Float64Array.from(times.gateway), [50, 99]);
  return { sessions: n, direct: { p50: d[0]!, p99: d[1]! }, gateway: { p50: g[0]!, p99: g[1]! }, addedP50: g[0]! - d[0]! };
}

/** `count` sessions through the gateway on 32 connections; Redis `used_memory` before and after. */
export async function measureStoredSessions(gateway: Gateway, headers: Record<string, string>, stats: Redis, count: number) {
  const pool = createPool(gateway.url, 32);
  try {
    await sleep(500);
    const memBefore = await redisInfoField(stats, 'memory', 'used_memory');
    const sessionIds: string[] = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < count) {
          next++;
          sessionIds.push(await openSession(pool, '/mcp/fast', headers));
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    await sleep(500);
    const memAfter = await redisInfoField(stats, 'memory', 'used_memory');
    const result = { sessions: sessionIds.length, usedMemoryDeltaBytes: memAfter - memBefore, bytesPerSession: (memAfter - memBefore) / Math.max(1, sessionIds.length), sessionsPerSec: sessionIds.length / secs };
    log(`stored sessions: ${sessionIds.length} in ${secs.toFixed(1)} s; Redis used_memory +${(result.usedMemoryDeltaBytes / 1024).toFixed(0)} KiB = ${result.bytesPerSession.toFixed(0)} B/session`);
    return { result, sessionIds };
  } finally {
    await pool.close();
  }
}

/**
 * One idle standalone stream per session; gateway RSS and JS heap before and after, each
 * sampled after a forced GC through the inspector, so that the garbage left by creating the
 * sessions does not hide what the streams hold.
 */
export async function measureIdleStreams(gateway: Gateway, token: string, sessionIds: string[], requested: number, note: string | undefined) {
  let inspector: Awaited<ReturnType<typeof attachInspector>> | undefined;
  let gcNote: string | undefined;
  try {
    inspector = await attachInspector(gateway.child.pid, gateway.inspectPort);
  } catch (err) {
    gcNote = `no forced GC (${(err as Error).message}); RSS deltas include garbage`;
    log(`WARNING ${gcNote}`);
  }
  const sample = async () => {
    if (inspector) {
      await inspector.collectGarbage();
      await inspector.collectGarbage();
      await sleep(300);
    }
    const heap = inspector ? await inspector.memoryUsage() : undefined;
    return { rss: processRssBytes(gateway.child.pid), heapUsed: heap?.heapUsed ?? NaN, external: heap?.external ?? NaN };
  };
  await sleep(500);
  const before = await sample();
  const headers = { Accept: 'text/event-stream', Authorization: `Bearer ${token}`, 'MCP-Protocol-Version': '2025-11-25' };
  const requests: StreamRequest[] = sessionIds.map((id) => ({ host: '127.0.0.1', port: gateway.port, path: '/mcp/fast', headers: { ...headers, 'Mcp-Session-Id': id } }));
  log(`idle streams: opening ${requests.length}`);
  const t0 = performance.now();
  const opened = await openIdleStreams(requests, 64);
  const openSecs = (performance.now() - t0) / 1000;
  if (opened.failures) log(`WARNING ${opened.failures} streams failed to open (${opened.firstError})`);
  await sleep(2000);
  const after = await sample();
  inspector?.close();
  const n = Math.max(1, opened.sockets.length);
  const perStream = (after.rss - before.rss) / n;
  log(`idle streams: ${opened.sockets.length} open in ${openSecs.toFixed(1)} s; gateway RSS ${(before.rss / 1e6).toFixed(0)} → ${(after.rss / 1e6).toFixed(0)} MB = ${(perStream / 1024).toFixed(1)} KiB/stream`);
  closeAll(opened.sockets);
  await sleep(500);
  return {
    requested,
    opened: opened.sockets.length,
    failures: opened.failures,
    firstError: opened.firstError,
    note: [note, gcNote].filter(Boolean).join('; ') || undefined,
    openSecs,
    rssBeforeBytes: before.rss,
    rssAfterBytes: after.rss,
    bytesPerStream: perStream,
    heapUsedBeforeBytes: before.heapUsed,
    heapUsedAfterBytes: after.heapUsed,
    heapBytesPerStream: (after.heapUsed - before.heapUsed) / n,
    externalBytesPerStream: (after.external - before.external) / n,
    /** Gateway RSS with 10,000 streams: measured when 10,000 were opened, else baseline + 10,000 × per-stream. */
    rssAt10kBytes: opened.sockets.length >= 10_000 ? after.rss : before.rss + 10_000 * perStream,
    projected: opened.sockets.length < 10_000,
  };
}

export type IdleStreams = Awaited<ReturnType<typeof measureIdleStreams>>;
export type NewSessions = Awaited<ReturnType<typeof measureNewSessions>>;
export type StoredSessions = Awaited<ReturnType<typeof measureStoredSessions>>['result'];
