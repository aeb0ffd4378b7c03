/**
 * The targets a bench run is judged against, each met or not: issue 7's (on the 2-core
 * build machine), issue 17's Redis Cluster bound, and issue 16's, which measure the gateway
 * as deployed (default configuration) against the naive pass-through in the same rounds.
 * Figures from the closed-loop rounds are judged under both load generators; the half-load
 * latency and the Redis figures come from one (undici) and are judged once.
 */
import type { StatelessResult } from './stateless.js';
import type { VirtualResult } from './virtual-phase.js';
import type { ClusterCpuResult } from './cluster.js';
import type { LatencyResult } from './latency.js';
import type { RoundTrips } from './redis-trips.js';
import type { IdleStreams, NewSessions, StoredSessions } from './sessions.js';
import type { Shape, ShapeResults } from './shapes.js';
import type { ThroughputResult } from './throughput.js';

export interface Target {
  name: string;
  target: string;
  value: string;
  pass: boolean | null;
  /** Which issue set it. */
  issue: string;
}

/** Everything measured for one answer type (JSON or SSE). */
export interface ModeResults {
  throughput: ThroughputResult;
  autocannon: ThroughputResult;
  latency: LatencyResult;
  redis: RoundTrips;
  cluster: ClusterCpuResult;
}

export interface RunResults {
  json: ModeResults;
  sse: ModeResults;
  /** The backend answer shapes of real SDK servers (bench/shapes.ts, issue 29). */
  shapes: Record<Shape, ShapeResults>;
  newSession: NewSessions;
  storedSessions: StoredSessions;
  idleStreams: IdleStreams;
  /** The 2026-07-28 tools/call against the 2025 one, on the silent gateway (bench/stateless.ts). */
  stateless: StatelessResult;
  /** A call through a virtual server against the same call through `/mcp`, on the silent gateway (bench/virtual-phase.ts). */
  virtual: VirtualResult;
}

export const fmt = (v: number | null | undefined, digits = 0) =>
  v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** CPU per call ÷ the naive pass-through's: issue 16's bounds (the SSE silent one is not set). */
const VS_NAIVE = { json: { gateway: 1.0, silent: 0.9 }, sse: { gateway: 1.3, silent: undefined } } as const;

function modeTargets(mode: 'json' | 'sse', m: ModeResults, connections: number): Target[] {
  const M = mode.toUpperCase();
  const out: Target[] = [];
  for (const t of [m.throughput, m.autocannon]) {
    const g = `${M}, ${t.generator}`;
    const gw = t.paths.gateway;
    out.push(
      { issue: '7', name: `throughput ratio @${connections} conn (${g})`, target: '≥ 0.40', value: fmt(gw.ratioToDirect, 3), pass: gw.ratioToDirect >= 0.4 },
      { issue: '7', name: `gateway CPU per call, saturated (${g})`, target: '≤ 100 µs', value: `${fmt(gw.cpuUsPerCall)} µs`, pass: gw.cpuUsPerCall <= 100 },
    );
    for (const which of ['gateway', 'silent'] as const) {
      const bound = VS_NAIVE[mode][which];
      if (bound === undefined) continue;
      const v = t.cpuVsNaive[which];
      const config = which === 'gateway' ? 'default configuration' : 'silent';
      out.push({ issue: '16', name: `gateway CPU per call ÷ naive pass-through, ${config} (${g})`, target: `≤ ${bound.toFixed(1)} ×`, value: fmt(v, 3), pass: v <= bound });
    }
  }
  const l = m.latency;
  out.push(
    { issue: '7', name: `gateway CPU per call, half load (${M})`, target: '≤ 100 µs', value: `${fmt(l.gatewayCpuUsPerCall)} µs`, pass: l.gatewayCpuUsPerCall <= 100 },
    { issue: '7, 16', name: `added p50 at half load, default configuration (${M})`, target: '≤ 0.5 ms', value: `${fmt(l.addedP50, 3)} ms (naive +${fmt(l.naiveAddedP50, 3)})`, pass: l.addedP50 <= 0.5 },
    { issue: '7', name: `Redis round trips per call, message path (${M})`, target: '≤ 1', value: fmt(m.redis.roundTripsPerCall, 2), pass: m.redis.roundTripsPerCall <= 1.001 },
    { issue: '17', name: `gateway CPU per call, Redis Cluster ÷ standalone (${M})`, target: '≤ 1.10', value: fmt(m.cluster.ratio, 3), pass: m.cluster.ratio <= 1.1 },
  );
  return out;
}

/** Issue 29's bounds per answer shape: CPU per call ÷ naive (default, silent) and added p50 at half load (ms). */
const SHAPE_BOUNDS: Record<Shape, { gateway: number; silent: number; addedP50: number }> = {
  chunked: { gateway: 1.0, silent: 0.9, addedP50: 0.3 },
  'sse-one': { gateway: 1.0, silent: 0.9, addedP50: 0.3 },
  'sse-progress': { gateway: 1.2, silent: 1.1, addedP50: 0.5 },
};

function shapeTargets(shape: Shape, m: ShapeResults): Target[] {
  const bound = SHAPE_BOUNDS[shape];
  const out: Target[] = [];
  for (const t of [m.throughput, m.autocannon]) {
    for (const which of ['gateway', 'silent'] as const) {
      const v = t.cpuVsNaive[which];
      const config = which === 'gateway' ? 'default configuration' : 'silent';
      out.push({ issue: '29', name: `gateway CPU per call ÷ naive pass-through, ${config} (${shape}, ${t.generator})`, target: `≤ ${bound[which].toFixed(1)} ×`, value: fmt(v, 3), pass: v <= bound[which] });
    }
  }
  const added = m.latency.addedP50;
  out.push({ issue: '29', name: `added p50 at half load, default configuration (${shape})`, target: `≤ ${bound.addedP50} ms`, value: `${fmt(added, 3)} ms (naive +${fmt(m.latency.naiveAddedP50, 3)})`, pass: added <= bound.addedP50 });
  return out;
}

export function targetsOf(r: RunResults, connections: number): Target[] {
  const s = r.idleStreams;
  const memory = (issue: string, mb: number): Target => ({
    issue,
    name: `gateway RSS with 10,000 idle SSE streams${s.projected ? ` (projected from ${s.opened})` : ''}`,
    target: `≤ ${mb} MB`,
    value: `${fmt(s.rssAt10kBytes / 1e6)} MB`,
    pass: s.opened > 0 ? s.rssAt10kBytes <= mb * 1e6 : null,
  });
  const era = r.stateless;
  const stateless: Target[] = [
    { issue: '15', name: 'CPU per call, MCP 2026-07-28 tools/call ÷ 2025-11-25, through the bridge to a 2025 backend (JSON, silent)', target: '≤ 1.0 ×', value: fmt(era.ratio, 3), pass: era.ratio <= 1.0 },
    { issue: '15', name: 'CPU per call, MCP 2026-07-28 tools/call ÷ 2025-11-25, each era end to end (JSON, silent)', target: '≤ 1.0 ×', value: fmt(era.nativeRatio, 3), pass: era.nativeRatio <= 1.0 },
    { issue: '15', name: 'CPU per call, the same, the 2025-11-25 request as big as the 2026-07-28 one (JSON, silent)', target: '≤ 1.0 ×', value: fmt(era.sameSizeRatio, 3), pass: era.sameSizeRatio <= 1.0 },
  ];
  const shapes = (Object.keys(SHAPE_BOUNDS) as Shape[]).flatMap((shape) => shapeTargets(shape, r.shapes[shape]));
  const virtual: Target = { issue: '31', name: 'CPU per call, a virtual server ÷ the same call through /mcp (JSON, silent)', target: '≤ 1.05 ×', value: fmt(r.virtual.cpuRatio, 3), pass: r.virtual.cpuRatio <= 1.05 };
  return [...modeTargets('json', r.json, connections), ...modeTargets('sse', r.sse, connections), ...shapes, memory('7', 500), memory('16', 300), ...stateless, virtual];
}
