/**
 * The answer shapes of `npm run bench` (issue 29): backends answering a tools/call as real SDK
 * servers do (bench/fast-backend.ts `--answer`, bytes as captured by bench/capture-answers.ts)
 * — chunked JSON (a v2 SDK server's web `Response`), one SSE event (SDK v1's default) and two
 * progress events then the result — each with its own naive pass-through in front, and reached
 * through both gateways as `fast-<shape>`. For each shape the same four paths as the JSON and
 * SSE phases (direct, naive, default, silent) run in rotating rounds under both load
 * generators, then open-loop rounds at half load; every ratio is within a round of this run.
 */
import type { ChildHandle } from '../test/helpers/child.js';
import { autocannonLoop } from './autocannon.js';
import { halfLoadLatency, type LatencyResult } from './latency.js';
import { closedLoop, openPath, type Path } from './load.js';
import { startBackend, startNaiveProxy, type Backend } from './processes.js';
import { measureThroughput, type Generator, type ThroughputResult, type Which } from './throughput.js';

export const SHAPES = ['chunked', 'sse-one', 'sse-progress'] as const;
export type Shape = (typeof SHAPES)[number];

export const SHAPE_TITLES: Record<Shape, string> = {
  chunked: 'chunked JSON (v2 SDK)',
  'sse-one': 'one SSE event (v1 SDK default)',
  'sse-progress': 'SSE, 2 progress events + result',
};

export interface ShapeResults {
  throughput: ThroughputResult;
  autocannon: ThroughputResult;
  latency: LatencyResult;
}

export interface ShapeProcesses {
  backends: Backend[];
  naive: Array<{ child: ChildHandle; port: number }>;
}

/** How long each shape's rounds run: fewer and shorter than the JSON and SSE phases in `--quick`. */
export interface ShapeSettings {
  rounds: number;
  autocannonRounds: number;
  roundMs: number;
  warmupMs: number;
  latencyRounds: number;
  connections: number;
  profile: boolean;
}

/** A backend per shape, named `fast-<shape>` for the gateways, and a naive pass-through in front of each. */
export async function startShapeProcesses(): Promise<ShapeProcesses> {
  const backends = await Promise.all(SHAPES.map(async (shape) => ({ ...(await startBackend(false, false, shape)), name: `fast-${shape}` })));
  const naive = await Promise.all(backends.map((b) => startNaiveProxy(b)));
  return { backends, naive };
}

/** The process ids of one shape's backend and pass-through, by the names the throughput rounds read. */
export function shapePids(procs: ShapeProcesses): Record<string, number> {
  return Object.fromEntries(SHAPES.flatMap((shape, i) => [[`backend-${shape}`, procs.backends[i]!.child.pid], [`naive-${shape}`, procs.naive[i]!.child.pid]]));
}

export async function measureShapes(
  s: ShapeSettings,
  procs: ShapeProcesses,
  gateways: { gateway: string; silent: string },
  headers: { gateway: Record<string, string>; silent: Record<string, string> },
  pids: Record<string, number>,
  pools: Array<Path['pool']>,
): Promise<Record<Shape, ShapeResults>> {
  const out = {} as Record<Shape, ShapeResults>;
  const generators: Generator[] = [
    { name: 'undici', run: (p, c, ms) => closedLoop(p, c, { durationMs: ms }), rounds: s.rounds, durationMs: s.roundMs, warmupMs: s.warmupMs },
    { name: 'autocannon', run: autocannonLoop, rounds: s.autocannonRounds, durationMs: s.roundMs, warmupMs: Math.min(1000, s.warmupMs) },
  ];
  for (const [i, shape] of SHAPES.entries()) {
    const backend = procs.backends[i]!;
    const gwPath = `/mcp/${backend.name}`;
    const direct = await openPath(`direct ${shape}`, `http://127.0.0.1:${backend.port}`, '/mcp', headers.gateway);
    const paths: Record<Which, Path> = {
      direct,
      naive: await openPath(`naive ${shape}`, `http://127.0.0.1:${procs.naive[i]!.port}`, gwPath, headers.gateway, direct.headers['mcp-session-id']),
      gateway: await openPath(`gateway ${shape}`, gateways.gateway, gwPath, headers.gateway),
      silent: await openPath(`silent gateway ${shape}`, gateways.silent, gwPath, headers.silent),
    };
    pools.push(...Object.values(paths).map((p) => p.pool));
    const server = { direct: `backend-${shape}`, naive: `naive-${shape}`, gateway: 'gateway', silent: 'silent' };
    const opts = { label: shape, connections: s.connections, profile: s.profile };
    const throughput = await measureThroughput(generators[0]!, paths, { pids, server }, undefined, opts);
    const autocannon = await measureThroughput(generators[1]!, paths, { pids, server }, undefined, opts);
    const latency = await halfLoadLatency(paths, { gateway: pids.gateway!, silent: pids.silent! }, throughput.paths.gateway.callsPerSec, { rounds: s.latencyRounds, durationMs: s.roundMs, label: shape, profile: s.profile });
    out[shape] = { throughput, autocannon, latency };
    for (const p of Object.values(paths)) await p.pool.close().catch(() => {});
  }
  return out;
}
