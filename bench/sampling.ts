/**
 * What every measuring phase of `npm run bench` shares: the log line, CPU snapshots of the
 * bench's processes and the machine, CPU shares between two snapshots, and the record of
 * when the profiled gateway was under load (its profile is summarized over those windows).
 */
import { median } from './load.js';
import { machineCpuUs, processCpuUs } from './system.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
export const round = (v: number, digits = 2) => (Number.isFinite(v) ? Math.round(v * 10 ** digits) / 10 ** digits : null);

/** CPU time so far (µs) of each named process, of this process (`loadgen`), of the machine and its steal. */
export function cpuNow(pids: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      out[name] = processCpuUs(pid);
    } catch {
      out[name] = NaN;
    }
  }
  const own = process.cpuUsage();
  out.loadgen = own.user + own.system;
  const machine = machineCpuUs();
  out.machine = machine.busy;
  out.steal = machine.steal;
  return out;
}

/**
 * CPU used by each process between two snapshots, as a share of one core; `machine` is all
 * cores together, `other` what processes outside the bench used (other work on the host).
 */
export function cpuShare(before: Record<string, number>, after: Record<string, number>, elapsedMs: number): Record<string, number> {
  const share: Record<string, number> = {};
  for (const name of Object.keys(after)) share[name] = (after[name]! - before[name]!) / (elapsedMs * 1000);
  const ours = Object.entries(share)
    .filter(([k]) => k !== 'machine' && k !== 'steal')
    .reduce((sum, [, v]) => sum + (Number.isFinite(v) ? v : 0), 0);
  share.other = Math.max(0, share.machine! - ours);
  return share;
}

/** When the profiled gateway was under load (µs, CLOCK_MONOTONIC). */
export const profiledWindows: Array<[number, number]> = [];
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

/** Runs `run`, recording its time span as a profile window when `profiled`. */
export async function underLoad<T>(profiled: boolean, run: () => Promise<T>): Promise<T> {
  const start = nowUs();
  try {
    return await run();
  } finally {
    if (profiled) profiledWindows.push([start, nowUs()]);
  }
}

/** Failed calls of all rounds of a phase: how many, and the first one's message. */
export interface ErrorSink {
  errors: number;
  firstError?: string;
}

export function checkErrors(r: { errors: number; firstError?: string }, where: string, sink: ErrorSink): void {
  if (r.errors > 0) {
    sink.errors += r.errors;
    sink.firstError ??= `${where}: ${r.firstError}`;
    log(`WARNING ${where}: ${r.errors} failed calls (${r.firstError})`);
  }
}

/** The median of each key over a list of records (CPU shares of rounds). */
export function medianRecord(list: Array<Record<string, number>>): Record<string, number> {
  const keys = new Set(list.flatMap((x) => Object.keys(x)));
  return Object.fromEntries([...keys].map((k) => [k, round(median(list.map((x) => x[k] ?? 0)), 3)!]));
}

/**
 * Bounds a bench run: past `limitMs` it logs `abort` and exits 1, and an interrupt (Ctrl-C) exits
 * 130, so the children's exit handlers stop them either way.
 */
export function boundRun(limitMs: number, abort: string): void {
  process.on('SIGINT', () => process.exit(130));
  setTimeout(() => {
    log(`ABORT: ${abort}`);
    process.exit(1);
  }, limitMs).unref();
}
