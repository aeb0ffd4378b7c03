/**
 * Reads a V8 `.cpuprofile` (written by `node --cpu-prof`) and ranks functions by self time:
 * each node's hitCount × the sampling interval, summed over nodes that are the same
 * function (same name, script and line). Also sums self time by module (the package in
 * node_modules, Node's internals, the gateway's own src/, or a V8 pseudo-node such as
 * "(garbage collector)"), which is usually the more telling view.
 *
 * `node --import tsx bench/profile.ts <file.cpuprofile>` prints both tables.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
export interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileEntry {
  name: string;
  where: string;
  module: string;
  selfMs: number;
  /** Share of busy time (everything but "(idle)"). */
  pct: number;
}

export interface ProfileSummary {
  file: string;
  /** Time covered: the whole profile, or the sum of the windows asked for. */
  durationMs: number;
  /** True when only samples inside the given time windows were counted. */
  windowed: boolean;
  sampleIntervalUs: number;
  busyMs: number;
  idleMs: number;
  top: ProfileEntry[];
  byModule: Array<{ module: string; selfMs: number; pct: number }>;
  /** The gateway's own functions (src/) by inclusive time: self plus everything they called. */
  srcInclusive: Array<{ name: string; where: string; totalMs: number; pct: number }>;
  /** Self time in socket-write natives (writev, writeUtf8String, …) by who wrote. */
  socketWrites: Array<{ to: string; selfMs: number; pct: number }>;
}

const SOCKET_WRITE = /^(writev|writeUtf8String|writeLatin1String|writeAsciiString|writeUcs2String|writeBuffer)$/;

function writer(url: string): string | undefined {
  if (url.includes('/ioredis/')) return 'Redis (ioredis)';
  if (url.includes('/undici/')) return 'backend (undici)';
  if (url.startsWith('node:_http_')) return 'client (node:http response)';
  return undefined;
}

const PSEUDO = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

function shortUrl(url: string, root: string): string {
  if (!url) return '';
  let u = url.startsWith('file://') ? url.slice('file://'.length) : url;
  if (u.startsWith(root)) u = u.slice(root.length);
  const nm = u.lastIndexOf('node_modules/');
  return nm >= 0 ? u.slice(nm + 'node_modules/'.length) : u;
}

/** `file:line`; tsx's output of a .ts file reports everything on line 1, so that is left out. */
function location(f: CallFrame, root: string): string {
  if (!f.url) return '';
  return f.lineNumber > 0 ? `${shortUrl(f.url, root)}:${f.lineNumber + 1}` : shortUrl(f.url, root);
}

function moduleOf(frame: CallFrame, root: string): string {
  if (PSEUDO.has(frame.functionName) && !frame.url) return frame.functionName;
  const url = frame.url;
  if (!url) return '(native / V8 builtins)';
  if (url.startsWith('node:')) return 'node (internals)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const path = url.startsWith('file://') ? url.slice('file://'.length) : url;
  if (path.startsWith(`${root}src/`)) return 'switchboard src/';
  return shortUrl(url, root) || '(unknown)';
}

/**
 * Hits per profile node. With `windows`, only samples taken inside those [start, end]
 * intervals count (µs of CLOCK_MONOTONIC, the clock of both V8's profile timestamps and
 * `process.hrtime`), and the duration is the windows' overlap with the profile.
 */
function sampleHits(profile: CpuProfile, windows?: Array<[number, number]>): { hitsById: Map<number, number>; durationUs: number; sampleCount: number } {
  const hitsById = new Map<number, number>();
  if (!windows?.length || !profile.samples || !profile.timeDeltas) {
    for (const node of profile.nodes) if (node.hitCount) hitsById.set(node.id, node.hitCount);
    const sampleCount = profile.samples?.length ?? [...hitsById.values()].reduce((a, b) => a + b, 0);
    return { hitsById, durationUs: profile.endTime - profile.startTime, sampleCount };
  }
  const sorted = [...windows].sort((a, b) => a[0] - b[0]);
  const durationUs = sorted.reduce((sum, [a, b]) => sum + Math.max(0, Math.min(b, profile.endTime) - Math.max(a, profile.startTime)), 0);
  let sampleCount = 0;
  let t = profile.startTime;
  let w = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    while (w < sorted.length && sorted[w]![1] < t) w++;
    if (w < sorted.length && sorted[w]![0] <= t) {
      const id = profile.samples[i]!;
      hitsById.set(id, (hitsById.get(id) ?? 0) + 1);
      sampleCount++;
    }
  }
  return { hitsById, durationUs, sampleCount };
}

/** Self time by function and by module; idle hits apart. */
function selfTimes(profile: CpuProfile, hitsById: Map<number, number>, root: string) {
  const byFunction = new Map<string, { name: string; where: string; module: string; hits: number }>();
  const byModule = new Map<string, number>();
  let idleHits = 0;
  let totalHits = 0;
  for (const node of profile.nodes) {
    const hits = hitsById.get(node.id) ?? 0;
    if (!hits) continue;
    totalHits += hits;
    const f = node.callFrame;
    if (f.functionName === '(idle)') {
      idleHits += hits;
      continue;
    }
    const name = f.functionName || '(anonymous)';
    const where = location(f, root);
    const key = `${name}\u0000${where}`;
    const mod = moduleOf(f, root);
    const entry = byFunction.get(key) ?? { name, where, module: mod, hits: 0 };
    entry.hits += hits;
    byFunction.set(key, entry);
    byModule.set(mod, (byModule.get(mod) ?? 0) + hits);
  }
  return { byFunction, byModule, idleHits, busyHits: totalHits - idleHits };
}

/** Inclusive time of src/ functions (each sampled node's ancestors walked once), and socket writes by writer. */
function inclusiveTimes(profile: CpuProfile, hitsById: Map<number, number>, root: string) {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n] as const));
  const inclusive = new Map<string, { name: string; where: string; hits: number }>();
  const writes = new Map<string, number>();
  for (const [id, hits] of hitsById) {
    if (SOCKET_WRITE.test(byId.get(id)!.callFrame.functionName)) {
      let to = 'other';
      for (let cur = parent.get(id); cur !== undefined; cur = parent.get(cur)) {
        const w = writer(byId.get(cur)!.callFrame.url);
        if (w) {
          to = w;
          break;
        }
      }
      writes.set(to, (writes.get(to) ?? 0) + hits);
    }
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      if (moduleOf(f, root) !== 'switchboard src/') continue;
      const name = f.functionName || '(anonymous)';
      const where = location(f, root);
      const key = `${name}\u0000${where}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const entry = inclusive.get(key) ?? { name, where, hits: 0 };
      entry.hits += hits;
      inclusive.set(key, entry);
    }
  }
  return { inclusive, writes };
}

/**
 * @param windows when given, only samples taken inside these [start, end] intervals count
 *   (µs of CLOCK_MONOTONIC), e.g. the periods when the bench was loading the gateway.
 */
export function summarizeProfile(file: string, root: string, topN = 15, windows?: Array<[number, number]>): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const { hitsById, durationUs, sampleCount } = sampleHits(profile, windows);
  const intervalUs = sampleCount > 0 ? durationUs / sampleCount : 0;
  const { byFunction, byModule, idleHits, busyHits } = selfTimes(profile, hitsById, root);
  const { inclusive, writes } = inclusiveTimes(profile, hitsById, root);
  const ms = (hits: number) => (hits * intervalUs) / 1000;
  const pct = (hits: number) => (busyHits > 0 ? (100 * hits) / busyHits : 0);
  return {
    file,
    durationMs: durationUs / 1000,
    windowed: Boolean(windows?.length),
    sampleIntervalUs: intervalUs,
    busyMs: ms(busyHits),
    idleMs: ms(idleHits),
    top: [...byFunction.values()]
      .sort((a, b) => b.hits - a.hits)
      .slice(0, topN)
      .map((e) => ({ name: e.name, where: e.where, module: e.module, selfMs: ms(e.hits), pct: pct(e.hits) })),
    byModule: [...byModule.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([module, hits]) => ({ module, selfMs: ms(hits), pct: pct(hits) })),
    srcInclusive: [...inclusive.values()]
      .sort((a, b) => b.hits - a.hits)
      .slice(0, topN)
      .map((e) => ({ name: e.name, where: e.where, totalMs: ms(e.hits), pct: pct(e.hits) })),
    socketWrites: [...writes.entries()].sort((a, b) => b[1] - a[1]).map(([to, hits]) => ({ to, selfMs: ms(hits), pct: pct(hits) })),
  };
}

/**
 * `--cpu-prof` writes one file per thread (`CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile`);
 * tsx's module loader runs in a worker thread. The main thread is thread 0.
 */
export function isMainThreadProfile(name: string): boolean {
  return /^CPU\.\d+\.\d+\.\d+\.0\.\d+\.cpuprofile$/.test(name);
}

export function formatProfile(s: ProfileSummary, modules = 12): string {
  const lines: string[] = [];
  lines.push(
    `CPU profile ${s.file}`,
    `  ${(s.durationMs / 1000).toFixed(1)} s ${s.windowed ? 'of gateway load rounds' : 'profiled'}, sample interval ${s.sampleIntervalUs.toFixed(0)} µs, busy ${(s.busyMs / 1000).toFixed(2)} s (percentages are of busy time)`,
    '',
    `  Top ${s.top.length} functions by self time`,
    `  ${'self ms'.padStart(9)} ${'%'.padStart(6)}  function  (location)`,
  );
  for (const e of s.top) lines.push(`  ${e.selfMs.toFixed(0).padStart(9)} ${e.pct.toFixed(1).padStart(5)}%  ${e.name}${e.where ? `  (${e.where})` : ''}`);
  lines.push('', '  Self time by module', `  ${'self ms'.padStart(9)} ${'%'.padStart(6)}  module`);
  for (const m of s.byModule.slice(0, modules)) lines.push(`  ${m.selfMs.toFixed(0).padStart(9)} ${m.pct.toFixed(1).padStart(5)}%  ${m.module}`);
  const totalWrites = s.socketWrites.reduce((sum, w) => sum + w.pct, 0);
  lines.push(
    '',
    `  Socket writes (self time of the write natives): ${totalWrites.toFixed(1)}% — ${s.socketWrites.map((w) => `${w.to} ${w.pct.toFixed(1)}%`).join(', ')}`,
  );
  lines.push('', '  Gateway functions (src/) by inclusive time (self + callees)', `  ${'total ms'.padStart(9)} ${'%'.padStart(6)}  function  (file)`);
  for (const e of s.srcInclusive) lines.push(`  ${e.totalMs.toFixed(0).padStart(9)} ${e.pct.toFixed(1).padStart(5)}%  ${e.name}  (${e.where})`);
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node --import tsx bench/profile.ts <file.cpuprofile>\n');
    process.exit(2);
  }
  const root = fileURLToPath(new URL('../', import.meta.url));
  process.stdout.write(`${formatProfile(summarizeProfile(file, root))}\n`);
}
