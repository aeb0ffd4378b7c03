/**
 * The session phases of `npm run bench`, on the default-configuration gateway: the cost of a
 * new session (initialize + initialized, one at a time, alternating with the direct path),
 * Redis memory per stored session, and gateway memory per idle standalone SSE stream. The
 * sessions are spread over {@link MEMORY_USERS} users, as issue 29 measures (10,000 sessions of
 * 100 users): per-user state (rate limits, shares, stream counts) is then what production holds.
 */
import type { Redis } from 'ioredis';
import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createPool, openSession, percentiles, type Path } from './load.js';
import type { Gateway } from './processes.js';
import { log, sleep } from './sampling.js';
import { closeAll, openIdleStreams, type StreamRequest } from './streams.js';
import { settledSample, type MemorySample, type SettleBounds } from './settled-memory.js';
import { redisInfoField } from './system.js';

/** How many users the stored sessions and idle streams are spread over, round robin. */
export const MEMORY_USERS = 100;

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

/** `count` sessions through the gateway on 32 connections, session i for user i mod users; Redis `used_memory` before and after. */
export async function measureStoredSessions(gateway: Gateway, userHeaders: Array<Record<string, string>>, stats: Redis, count: number) {
  const pool = createPool(gateway.url, 32);
  try {
    await sleep(500);
    const memBefore = await redisInfoField(stats, 'memory', 'used_memory');
    const sessions: Array<{ id: string; user: number }> = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < count) {
          const user = next++ % userHeaders.length;
          sessions.push({ id: await openSession(pool, '/mcp/fast', userHeaders[user]!), user });
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    await sleep(500);
    const memAfter = await redisInfoField(stats, 'memory', 'used_memory');
    const result = { sessions: sessions.length, users: userHeaders.length, usedMemoryDeltaBytes: memAfter - memBefore, bytesPerSession: (memAfter - memBefore) / Math.max(1, sessions.length), sessionsPerSec: sessions.length / secs };
    log(`stored sessions: ${sessions.length} of ${userHeaders.length} users in ${secs.toFixed(1)} s; Redis used_memory +${(result.usedMemoryDeltaBytes / 1024).toFixed(0)} KiB = ${result.bytesPerSession.toFixed(0)} B/session`);
    return { result, sessions };
  } finally {
    await pool.close();
  }
}

export type { MemorySample } from './settled-memory.js';

export interface MemorySampler {
  /** Gateway RSS (from /proc) and JS heap (its /metrics) once a collection has settled (settled-memory.ts). */
  sample(): Promise<MemorySample>;
  /** Why a figure is not what it claims, if it is not (a sample that did not settle). */
  readonly notes: string[];
}

/**
 * Samples the gateway from outside (settled-memory.ts). With `snapshotDir` (the gateway
 * started with `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=<it>`), a heap snapshot is
 * written after each sample: open two in Chrome DevTools, Memory, "Comparison".
 */
export function memorySampler(gateway: Gateway, bounds: SettleBounds, snapshotDir?: string): MemorySampler {
  const notes: string[] = [];
  let taken = 0;
  const sample = async (): Promise<MemorySample> => {
    const s = await settledSample(gateway.child.pid, `${gateway.url}/metrics`, bounds);
    const n = ++taken;
    log(`memory sample ${n}: RSS ${(s.rss / 1e6).toFixed(1)} MB, JS heap ${(s.heapUsed / 1e6).toFixed(1)} of ${(s.heapTotal / 1e6).toFixed(1)} MB, ${s.settled ? 'settled' : 'NOT settled'} after ${(s.waitedMs / 1000).toFixed(0)} s and ${s.fullCollections} full collections`);
    if (!s.settled) notes.push(`memory sample ${n} did not settle within ${bounds.maxWaitMs / 1000} s (RSS never held still after a full collection): its figure is the last reading`);
    if (snapshotDir) log(`heap snapshot: ${await writeHeapSnapshot(gateway.child.pid, snapshotDir)}`);
    return s;
  };
  return { sample, notes };
}

/** Signals the gateway to write a heap snapshot into `dir` and waits until the file is complete. */
async function writeHeapSnapshot(pid: number, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 180_000;
  let size = -1;
  while (Date.now() < deadline) {
    await sleep(1_000);
    const file = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (!file) continue;
    const now = statSync(join(dir, file)).size;
    // Complete once it stopped growing and its JSON is closed.
    if (now === size && now > 0 && lastByte(join(dir, file), now) === '}') return join(dir, file);
    size = now;
  }
  throw new Error(`no complete heap snapshot in ${dir} within 180 s`);
}

function lastByte(file: string, size: number): string {
  const fd = openSync(file, 'r');
  try {
    const byte = Buffer.alloc(1);
    readSync(fd, byte, 0, 1, size - 1);
    return byte.toString('latin1');
  } finally {
    closeSync(fd);
  }
}

/**
 * One idle standalone stream per session, each over a raw socket with its user's token; gateway
 * RSS and JS heap sampled (once settled, from outside) with the sessions only and with the streams open,
 * so that the garbage left by creating the sessions does not hide what the streams hold.
 * `idle` is the sample taken before any session was made.
 */
export async function measureIdleStreams(gateway: Gateway, memory: MemorySampler, idle: MemorySample, tokens: string[], sessions: Array<{ id: string; user: number }>, requested: number, note: string | undefined) {
  const before = await memory.sample();
  const requests: StreamRequest[] = sessions.map((s) => ({
    host: '127.0.0.1',
    port: gateway.port,
    path: '/mcp/fast',
    headers: { Accept: 'text/event-stream', Authorization: `Bearer ${tokens[s.user]!}`, 'MCP-Protocol-Version': '2025-11-25', 'Mcp-Session-Id': s.id },
  }));
  log(`idle streams: opening ${requests.length}`);
  const t0 = performance.now();
  const opened = await openIdleStreams(requests, 64);
  const openSecs = (performance.now() - t0) / 1000;
  if (opened.failures) log(`WARNING ${opened.failures} streams failed to open (${opened.firstError})`);
  await sleep(1500);
  const after = await memory.sample();
  const n = Math.max(1, opened.sockets.length);
  const perStream = (after.rss - before.rss) / n;
  const perSession = (before.rss - idle.rss) / Math.max(1, sessions.length);
  log(
    `idle streams: ${opened.sockets.length} open in ${openSecs.toFixed(1)} s; gateway RSS idle ${(idle.rss / 1e6).toFixed(0)} MB → ${(before.rss / 1e6).toFixed(0)} with ${sessions.length} sessions ` +
      `(${(perSession / 1024).toFixed(1)} KiB/session) → ${(after.rss / 1e6).toFixed(0)} with the streams = ${(perStream / 1024).toFixed(1)} KiB/stream; JS heap ${(idle.heapUsed / 1e6).toFixed(0)} → ${(before.heapUsed / 1e6).toFixed(0)} → ${(after.heapUsed / 1e6).toFixed(0)} MB`,
  );
  closeAll(opened.sockets);
  await sleep(500);
  return {
    requested,
    opened: opened.sockets.length,
    failures: opened.failures,
    firstError: opened.firstError,
    note: [note, ...memory.notes].filter(Boolean).join('; ') || undefined,
    /** Whether each sample (idle, with the sessions, with the streams) settled (settled-memory.ts). */
    settled: { idle: idle.settled, sessions: before.settled, streams: after.settled },
    openSecs,
    users: tokens.length,
    rssIdleBytes: idle.rss,
    rssBytesPerSession: perSession,
    heapUsedIdleBytes: idle.heapUsed,
    heapBytesPerSession: (before.heapUsed - idle.heapUsed) / Math.max(1, sessions.length),
    rssBeforeBytes: before.rss,
    rssAfterBytes: after.rss,
    bytesPerStream: perStream,
    heapUsedBeforeBytes: before.heapUsed,
    heapUsedAfterBytes: after.heapUsed,
    heapTotalIdleBytes: idle.heapTotal,
    heapTotalBeforeBytes: before.heapTotal,
    heapTotalAfterBytes: after.heapTotal,
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
