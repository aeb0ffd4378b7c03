/**
 * The printed report of `npm run bench`: one table (columns direct, naive pass-through,
 * gateway in its default configuration, gateway silent), a section per answer type and load
 * generator, then the targets met or not, then who used the CPU. The same figures go to
 * bench/results/latest.json (bench/run.ts).
 */
import type { ThroughputResult, Which } from './throughput.js';
import { SHAPE_TITLES, SHAPES, type ShapeResults } from './shapes.js';
import { fmt, type ModeResults, type RunResults, type Target } from './targets.js';

const COLUMNS = ['', 'direct', 'naive', 'default', 'silent', ''];
const mark = (pass: boolean | null) => (pass === null ? '—' : pass ? 'PASS' : 'FAIL');

export function table(rows: string[][], header: string[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const last = header.length - 1;
  const line = (r: string[]) => r.map((c, i) => (i === 0 || i === last ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** A row with one value per path (direct, naive, default, silent) and a note. */
const row = (name: string, t: ThroughputResult, value: (w: Which) => string, note = '') => [name, value('direct'), value('naive'), value('gateway'), value('silent'), note];

function closedLoopRows(t: ThroughputResult, connections: number): string[][] {
  const p = t.paths;
  const sc = (w: Which) => fmt(p[w].syscallsPerCall.reads + p[w].syscallsPerCall.writes, 2);
  return [
    row(`  throughput @${connections} conn (calls/s)`, t, (w) => fmt(p[w].callsPerSec), `÷ direct: naive ${fmt(p.naive.ratioToDirect, 3)}, default ${fmt(p.gateway.ratioToDirect, 3)}, silent ${fmt(p.silent.ratioToDirect, 3)}`),
    row(`  CPU per call, saturated (µs; direct: the backend's)`, t, (w) => fmt(p[w].cpuUsPerCall), `÷ naive: default ${fmt(t.cpuVsNaive.gateway, 3)}, silent ${fmt(t.cpuVsNaive.silent, 3)}; default ÷ silent ${fmt(t.defaultVsSilent, 3)}`),
    row(`  system calls per call, read + write`, t, sc, `default ${fmt(p.gateway.syscallsPerCall.reads, 2)} r + ${fmt(p.gateway.syscallsPerCall.writes, 2)} w`),
    row(`  closed-loop p50 @${connections} conn (ms)`, t, (w) => fmt(p[w].p50ms, 3)),
  ];
}

function modeRows(mode: 'json' | 'sse', m: ModeResults, connections: number): string[][] {
  const M = mode.toUpperCase();
  const l = m.latency;
  const rt = m.redis;
  const c = m.cluster;
  return [
    [`tools/call, ${M} answers — undici load generator`, '', '', '', '', ''],
    ...closedLoopRows(m.throughput, connections),
    [`  Redis commands per call (commandstats)`, '0', '0', fmt(m.throughput.redisCommandsPerCall, 2), '', ''],
    [`  open-loop p50 @ ${fmt(l.rate)} calls/s (ms)`, fmt(l.direct.p50, 3), fmt(l.naive?.p50, 3), fmt(l.gateway.p50, 3), fmt(l.silent.p50, 3), `added: default +${fmt(l.addedP50, 3)}, silent +${fmt(l.silentAddedP50, 3)}, naive +${fmt(l.naiveAddedP50, 3)}`],
    [`  open-loop p99 @ ${fmt(l.rate)} calls/s (ms)`, fmt(l.direct.p99, 3), fmt(l.naive?.p99, 3), fmt(l.gateway.p99, 3), fmt(l.silent.p99, 3), `added: default +${fmt(l.addedP99, 3)}, silent +${fmt(l.silentAddedP99, 3)}, naive +${fmt(l.naiveAddedP99, 3)}`],
    [`  gateway CPU per call, half load (µs)`, '', '', fmt(l.gatewayCpuUsPerCall), fmt(l.silentCpuUsPerCall), ''],
    [`  Redis round trips per call (MONITOR)`, '0', '0', fmt(rt.roundTripsPerCall, 2), '', `+${fmt(rt.fromLuaPerCall, 2)} in Lua; rate-limit sync +${fmt(rt.backgroundPerCall, 2)} (every 100 ms, all users)`],
    [`  gateway CPU per call, Redis Cluster (µs)`, '', '', '', fmt(c.clusterCpuUsPerCall), `standalone ${fmt(c.standaloneCpuUsPerCall)}, cluster ÷ standalone ${fmt(c.ratio, 3)} (both silent)`],
    [`tools/call, ${M} answers — autocannon`, '', '', '', '', ''],
    ...closedLoopRows(m.autocannon, connections),
  ];
}

/** One answer shape (bench/shapes.ts): both generators' closed loops, then the open loop. */
function shapeRows(title: string, m: ShapeResults, connections: number): string[][] {
  const l = m.latency;
  return [
    [`tools/call, backend answers ${title} — undici`, '', '', '', '', ''],
    ...closedLoopRows(m.throughput, connections),
    [`  open-loop p50 @ ${fmt(l.rate)} calls/s (ms)`, fmt(l.direct.p50, 3), fmt(l.naive?.p50, 3), fmt(l.gateway.p50, 3), fmt(l.silent.p50, 3), `added: default +${fmt(l.addedP50, 3)}, silent +${fmt(l.silentAddedP50, 3)}, naive +${fmt(l.naiveAddedP50, 3)}`],
    [`  open-loop p99 @ ${fmt(l.rate)} calls/s (ms)`, fmt(l.direct.p99, 3), fmt(l.naive?.p99, 3), fmt(l.gateway.p99, 3), fmt(l.silent.p99, 3), `added: default +${fmt(l.addedP99, 3)}, silent +${fmt(l.silentAddedP99, 3)}, naive +${fmt(l.naiveAddedP99, 3)}`],
    [`tools/call, backend answers ${title} — autocannon`, '', '', '', '', ''],
    ...closedLoopRows(m.autocannon, connections),
  ];
}

function sessionRows(r: RunResults): string[][] {
  const n = r.newSession;
  const s = r.idleStreams;
  return [
    ['sessions (default configuration)', '', '', '', '', ''],
    [`  new session p50 (initialize + initialized, ms)`, fmt(n.direct.p50, 3), '', fmt(n.gateway.p50, 3), '', `+${fmt(n.addedP50, 3)}`],
    [`  new session p99 (ms)`, fmt(n.direct.p99, 3), '', fmt(n.gateway.p99, 3), '', ''],
    [`  Redis memory per stored session (bytes)`, '', '', fmt(r.storedSessions.bytesPerSession), '', `${fmt(r.storedSessions.sessions)} sessions`],
    [`idle SSE streams (${fmt(s.opened)} open, ${fmt(s.users)} users)`, '', '', '', '', ''],
    [`  gateway RSS idle → with sessions (MB)`, '', '', `${fmt(s.rssIdleBytes / 1e6)} → ${fmt(s.rssBeforeBytes / 1e6)}`, '', `${fmt(s.rssBytesPerSession / 1024, 1)} KiB per session, JS heap ${fmt(s.heapBytesPerSession / 1024, 1)}${s.settled.idle && s.settled.sessions ? '' : ' (a sample did not settle)'}`],
    [`  gateway RSS per idle stream (KiB)`, '', '', fmt(s.bytesPerStream / 1024, 1), '', `JS heap ${fmt(s.heapBytesPerStream / 1024, 1)}`],
    [`  gateway RSS before → with streams (MB)`, '', '', `${fmt(s.rssBeforeBytes / 1e6)} → ${fmt(s.rssAfterBytes / 1e6)}`, '', s.settled.streams ? 'settled' : 'NOT settled: the last reading'],
    [`  gateway RSS with 10,000 streams (MB)`, '', '', fmt(s.rssAt10kBytes / 1e6), '', s.projected ? 'projected' : 'measured'],
  ];
}

export function resultsTable(r: RunResults, connections: number): string {
  const shapes = SHAPES.flatMap((shape) => shapeRows(SHAPE_TITLES[shape], r.shapes[shape], connections));
  return table([...modeRows('json', r.json, connections), ...modeRows('sse', r.sse, connections), ...shapes, ...sessionRows(r)], COLUMNS);
}

export function targetsTable(targets: Target[]): string {
  const rows = targets.map((t) => [t.name, t.target, t.value, mark(t.pass), t.issue]);
  return table(rows, ['target', 'bound', 'measured', '', 'issue']);
}

/** Who used the CPU during the gateway rounds (share of one core; 2 cores = 200 %). */
export function cpuShares(r: RunResults): string {
  const share = (x: Record<string, number>) =>
    `gateway ${fmt((x.gateway ?? 0) * 100)}%, silent gateway ${fmt((x.silent ?? 0) * 100)}%, backend ${fmt(((x.backendJson ?? 0) + (x.backendSse ?? 0)) * 100)}%, redis ${fmt((x.redis ?? 0) * 100)}%, load generator ${fmt((x.loadgen ?? 0) * 100)}%, other processes ${fmt((x.other ?? 0) * 100)}%, steal ${fmt((x.steal ?? 0) * 100)}%`;
  const lines = ['CPU, share of one core (2 cores = 200%), median of rounds:'];
  for (const mode of ['json', 'sse'] as const) {
    for (const t of [r[mode].throughput, r[mode].autocannon]) {
      lines.push(`  ${mode.toUpperCase()} ${t.generator}, default gateway rounds: ${share(t.paths.gateway.cpuShare)}`);
    }
  }
  lines.push(`  JSON undici, direct rounds: ${share(r.json.throughput.paths.direct.cpuShare)}`);
  return lines.join('\n');
}
