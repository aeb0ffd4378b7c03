/**
 * The closed-loop throughput rounds of `npm run bench`: four paths in the same rounds, the
 * order rotating every round so none always goes first —
 *  - direct: the backend itself, with its own session;
 *  - naive: the naive Fastify + undici pass-through (bench/naive-proxy.ts), the reference
 *    the issue measures the gateway against;
 *  - gateway: Switchboard in its default configuration, as shipped (`log.level: info`, its
 *    stdout drained by the bench as a log collector would, rate limit and metrics on);
 *  - silent: a second Switchboard, the same but `log.level: silent`.
 * Run once per load generator (undici, autocannon). Every ratio is taken within a round and
 * the median of the rounds is reported, so a noisy host moves both sides of it alike.
 */
import type { Redis } from 'ioredis';
import { median, percentiles, type LoopResult, type Path } from './load.js';
import { checkErrors, cpuNow, cpuShare, log, medianRecord, round, sleep, underLoad, type ErrorSink } from './sampling.js';
import { commandDelta, commandStats, processSyscalls } from './system.js';

export type Which = 'direct' | 'naive' | 'gateway' | 'silent';
export const PATHS: readonly Which[] = ['direct', 'naive', 'gateway', 'silent'];

/** A load generator: a closed loop of `connections` connections on one path for `durationMs`. */
export interface Generator {
  name: 'undici' | 'autocannon';
  run(p: Path, connections: number, durationMs: number): Promise<LoopResult>;
  rounds: number;
  durationMs: number;
  warmupMs: number;
}

/** The processes of a run by name (CPU shares), and which of them serves each path. */
export interface Processes {
  pids: Record<string, number>;
  server: Record<Which, string>;
}

export interface PathFigures {
  callsPerSec: number;
  rounds: number[];
  /** calls/s ÷ direct's, per round, median. */
  ratioToDirect: number;
  /** Closed-loop latency p50 (mostly queueing at 16 connections). */
  p50ms: number;
  /** CPU per call of the process serving the path (the backend for direct). */
  cpuUsPerCall: number;
  cpuRounds: number[];
  /** Read + write system calls per call of that process (/proc/<pid>/io). */
  syscallsPerCall: { reads: number; writes: number };
  /** Share of one core used by each process during this path's rounds, median. */
  cpuShare: Record<string, number>;
}

export interface ThroughputResult extends ErrorSink {
  generator: string;
  paths: Record<Which, PathFigures>;
  /** Gateway CPU per call ÷ the naive pass-through's in the same round, median: default and silent. */
  cpuVsNaive: { gateway: number; silent: number; gatewayRounds: number[]; silentRounds: number[] };
  /** Default configuration ÷ silent, CPU per call in the same round, median: what the shipped log level costs. */
  defaultVsSilent: number;
  /** Redis commands per call of the default gateway (INFO commandstats), and by command. */
  redisCommandsPerCall: number;
  redisBreakdownPerCall: Record<string, number>;
}

interface Samples {
  rate: number[];
  cpu: number[];
  reads: number[];
  writes: number[];
  p50: number[];
  share: Array<Record<string, number>>;
}

/** One path's round: its result, and the CPU and system calls its server spent. */
async function oneRound(gen: Generator, p: Path, which: Which, procs: Processes, connections: number, profile: boolean) {
  const pid = procs.pids[procs.server[which]]!;
  const io0 = processSyscalls(pid);
  const cpu0 = cpuNow(procs.pids);
  const res = await underLoad(profile && which === 'gateway', () => gen.run(p, connections, gen.durationMs));
  const cpu1 = cpuNow(procs.pids);
  const io1 = processSyscalls(pid);
  const n = Math.max(1, res.calls);
  const name = procs.server[which];
  return {
    res,
    rate: (res.calls * 1000) / res.elapsedMs,
    cpu: (cpu1[name]! - cpu0[name]!) / n,
    reads: (io1.reads - io0.reads) / n,
    writes: (io1.writes - io0.writes) / n,
    share: cpuShare(cpu0, cpu1, res.elapsedMs),
  };
}

export async function measureThroughput(gen: Generator, paths: Record<Which, Path>, procs: Processes, redis: Redis | undefined, opts: { label: string; connections: number; profile: boolean }): Promise<ThroughputResult> {
  const label = `${opts.label} ${gen.name}`;
  log(`${label}: warm-up ${gen.warmupMs} ms per path`);
  for (const which of PATHS) await gen.run(paths[which], opts.connections, gen.warmupMs);
  const s = Object.fromEntries(PATHS.map((w) => [w, { rate: [], cpu: [], reads: [], writes: [], p50: [], share: [] } as Samples])) as Record<Which, Samples>;
  const ratios = { direct: [] as number[], naive: [] as number[], gateway: [] as number[], silent: [] as number[], gwNaive: [] as number[], silentNaive: [] as number[], gwSilent: [] as number[] };
  const redisPerCall: number[] = [];
  const breakdowns: Array<Record<string, number>> = [];
  const sink: ErrorSink = { errors: 0 };
  for (let r = 0; r < gen.rounds; r++) {
    const order = PATHS.map((_, i) => PATHS[(i + r) % PATHS.length]!);
    for (const which of order) {
      await sleep(200);
      const stats0 = which === 'gateway' && redis ? await commandStats(redis) : undefined;
      const got = await oneRound(gen, paths[which], which, procs, opts.connections, opts.profile);
      checkErrors(got.res, `${label} ${which} round ${r + 1}`, sink);
      const x = s[which];
      x.rate.push(got.rate);
      x.cpu.push(got.cpu);
      x.reads.push(got.reads);
      x.writes.push(got.writes);
      x.p50.push(percentiles(got.res.latencies, [50])[0]!);
      x.share.push(got.share);
      if (stats0) {
        const delta = commandDelta(stats0, await commandStats(redis!));
        redisPerCall.push(delta.total / Math.max(1, got.res.calls));
        breakdowns.push(Object.fromEntries(Object.entries(delta.byCommand).map(([k, v]) => [k, v / Math.max(1, got.res.calls)])));
      }
    }
    const at = (w: Which, k: 'rate' | 'cpu') => s[w][k].at(-1)!;
    for (const w of PATHS) ratios[w].push(at(w, 'rate') / at('direct', 'rate'));
    ratios.gwNaive.push(at('gateway', 'cpu') / at('naive', 'cpu'));
    ratios.silentNaive.push(at('silent', 'cpu') / at('naive', 'cpu'));
    ratios.gwSilent.push(at('gateway', 'cpu') / at('silent', 'cpu'));
    log(
      `${label} round ${r + 1}/${gen.rounds}: ` +
        PATHS.map((w) => `${w} ${at(w, 'rate').toFixed(0)}/s ${at(w, 'cpu').toFixed(0)} µs/call ${(s[w].reads.at(-1)! + s[w].writes.at(-1)!).toFixed(2)} sc/call`).join(', ') +
        `; CPU ÷ naive: default ${ratios.gwNaive.at(-1)!.toFixed(3)}, silent ${ratios.silentNaive.at(-1)!.toFixed(3)}`,
    );
  }
  const figures = (w: Which): PathFigures => ({
    callsPerSec: median(s[w].rate),
    rounds: s[w].rate.map((x) => round(x, 0)!),
    ratioToDirect: median(ratios[w]),
    p50ms: median(s[w].p50),
    cpuUsPerCall: median(s[w].cpu),
    cpuRounds: s[w].cpu.map((x) => round(x, 1)!),
    syscallsPerCall: { reads: median(s[w].reads), writes: median(s[w].writes) },
    cpuShare: medianRecord(s[w].share),
  });
  return {
    generator: gen.name,
    paths: Object.fromEntries(PATHS.map((w) => [w, figures(w)])) as Record<Which, PathFigures>,
    cpuVsNaive: { gateway: median(ratios.gwNaive), silent: median(ratios.silentNaive), gatewayRounds: ratios.gwNaive.map((x) => round(x, 3)!), silentRounds: ratios.silentNaive.map((x) => round(x, 3)!) },
    defaultVsSilent: median(ratios.gwSilent),
    redisCommandsPerCall: median(redisPerCall),
    redisBreakdownPerCall: medianRecord(breakdowns),
    ...sink,
  };
}
