/**
 * Where one gateway's extra CPU per call goes, against another's (issue 44 part 1: "profile,
 * don't guess"). Each V8 `.cpuprofile` is read over the windows when that gateway was under
 * load, and every sample is turned into µs per call (samples × the interval ÷ the calls served
 * in those windows), so two gateways measured in the same rounds compare per call, whatever
 * their throughput: self time by function and by file, inclusive time (self + callees, each
 * frame counted once per sample) by function, and the busy total.
 *
 * Profiles are wall-clock samples of the main thread (bench/README.md "Profile"), so on a busy
 * machine time runnable-but-descheduled lands on whatever was running; the shares survive
 * that better than absolute figures, which is why both profiles are taken in the same rounds.
 *
 *   node --import tsx bench/profile-diff.ts <a.cpuprofile> <b.cpuprofile>   (whole profiles, per sample)
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CallFrame, CpuProfile } from './profile.js';

/** µs per call of one gateway, by what was running. */
export interface CallCosts {
  calls: number;
  /** All samples but idle, µs per call. */
  busy: number;
  selfByFunction: Map<string, number>;
  selfByFile: Map<string, number>;
  inclusiveByFunction: Map<string, number>;
}

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** A file's short name: within node_modules from the package on, within the repository from its root. */
function fileOf(url: string): string {
  if (!url) return '(native)';
  let u = url.startsWith('file://') ? url.slice('file://'.length) : url;
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) return u.slice(nm + 'node_modules/'.length);
  const src = u.indexOf('/src/');
  if (u.startsWith(ROOT)) u = u.slice(ROOT.length);
  else if (src >= 0) u = u.slice(src + 1); // another worktree's src/
  return u;
}

/** `name (file:line)`; tsx's compiled .ts reports line 0 for everything, so the column tells functions apart there. */
function functionKey(f: CallFrame): string {
  const name = f.functionName || '(anonymous)';
  if (!f.url) return name;
  return `${name} (${fileOf(f.url)}:${f.lineNumber > 0 ? f.lineNumber + 1 : `c${f.columnNumber}`})`;
}

function add(map: Map<string, number>, key: string, v: number): void {
  map.set(key, (map.get(key) ?? 0) + v);
}

/**
 * The costs per call of a profile, counting only samples inside `windows` ([start, end] µs of
 * CLOCK_MONOTONIC, the clock of V8's timestamps and `process.hrtime`); all samples without
 * windows. `calls`: the calls served in those windows (1 gives µs per profile).
 */
export function callCosts(file: string, calls: number, windows?: Array<[number, number]>): CallCosts {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n] as const));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const hits = new Map<number, number>();
  const sorted = [...(windows ?? [])].sort((a, b) => a[0] - b[0]);
  let t = profile.startTime;
  let w = 0;
  const samples = profile.samples ?? [];
  for (let i = 0; i < samples.length; i++) {
    t += profile.timeDeltas?.[i] ?? 0;
    if (sorted.length) {
      while (w < sorted.length && sorted[w]![1] < t) w++;
      if (w >= sorted.length || sorted[w]![0] > t) continue;
    }
    const id = samples[i]!;
    hits.set(id, (hits.get(id) ?? 0) + 1);
  }
  // The sampling interval: the profile's span over its samples.
  const intervalUs = (profile.endTime - profile.startTime) / Math.max(1, samples.length);
  const us = (n: number) => (n * intervalUs) / Math.max(1, calls);
  const out: CallCosts = { calls, busy: 0, selfByFunction: new Map(), selfByFile: new Map(), inclusiveByFunction: new Map() };
  for (const [id, n] of hits) {
    const node = byId.get(id)!;
    const f = node.callFrame;
    if (f.functionName === '(idle)') continue;
    const v = us(n);
    out.busy += v;
    add(out.selfByFunction, functionKey(f), v);
    add(out.selfByFile, f.url ? fileOf(f.url) : f.functionName || '(native)', v);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const key = functionKey(byId.get(cur)!.callFrame);
      if (seen.has(key)) continue;
      seen.add(key);
      add(out.inclusiveByFunction, key, v);
    }
  }
  return out;
}

/**
 * The costs scaled so that their busy total is `cpuUsPerCall`, the process's CPU per call from
 * /proc in the same windows: each function keeps its share of the samples, and the shares
 * become µs of CPU. On a busy machine a wall-clock sample also lands on time the thread was
 * runnable but not running; scaled, that time is spread over what ran, in proportion.
 */
export function scaledCosts(c: CallCosts, cpuUsPerCall: number): CallCosts {
  const f = c.busy > 0 ? cpuUsPerCall / c.busy : 0;
  const scale = (m: Map<string, number>) => new Map([...m].map(([k, v]) => [k, v * f] as const));
  return { calls: c.calls, busy: c.busy * f, selfByFunction: scale(c.selfByFunction), selfByFile: scale(c.selfByFile), inclusiveByFunction: scale(c.inclusiveByFunction) };
}

/** The `n` keys whose µs per call grew most from `base` to `other` (and what shrank most, at the end). */
export function diffRows(base: Map<string, number>, other: Map<string, number>, n: number): Array<{ key: string; base: number; other: number; delta: number }> {
  const keys = new Set([...base.keys(), ...other.keys()]);
  const rows = [...keys].map((key) => ({ key, base: base.get(key) ?? 0, other: other.get(key) ?? 0, delta: (other.get(key) ?? 0) - (base.get(key) ?? 0) }));
  rows.sort((a, b) => b.delta - a.delta);
  return rows.slice(0, n);
}

/** A table of {@link diffRows}, µs per call. */
export function formatDiff(title: string, baseName: string, otherName: string, rows: ReturnType<typeof diffRows>): string {
  const lines = [title, `  ${baseName.padStart(10)} ${otherName.padStart(10)} ${'Δ µs/call'.padStart(10)}  what`];
  for (const r of rows) lines.push(`  ${r.base.toFixed(2).padStart(10)} ${r.other.toFixed(2).padStart(10)} ${(r.delta >= 0 ? '+' : '') + r.delta.toFixed(2).padStart(9)}  ${r.key}`);
  return lines.join('\n');
}

/** The whole comparison: busy totals, then self by file, self by function, inclusive by function. */
export function compareCosts(baseName: string, base: CallCosts, otherName: string, other: CallCosts, n = 25): string {
  return [
    `${otherName} vs ${baseName}: busy ${other.busy.toFixed(1)} vs ${base.busy.toFixed(1)} µs per call (${(other.busy / base.busy).toFixed(3)}×; calls ${other.calls} / ${base.calls})`,
    formatDiff('self time by file, largest growth first', baseName, otherName, diffRows(base.selfByFile, other.selfByFile, n)),
    formatDiff('self time by function, largest growth first', baseName, otherName, diffRows(base.selfByFunction, other.selfByFunction, n)),
    formatDiff('inclusive time by function, largest growth first', baseName, otherName, diffRows(base.inclusiveByFunction, other.inclusiveByFunction, n)),
  ].join('\n\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [a, b] = process.argv.slice(2);
  if (!a || !b) {
    process.stderr.write('usage: node --import tsx bench/profile-diff.ts <base.cpuprofile> <other.cpuprofile>\n');
    process.exit(2);
  }
  process.stdout.write(`${compareCosts('base', callCosts(a, 1), 'other', callCosts(b, 1))}\n`);
}
