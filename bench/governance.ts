/**
 * The governance phase (issue 44 part 1): what turning on what sets the gateway apart — traces
 * to a collector, the audit trail, CEL rules — costs per call, against the same gateway without
 * it, in the same rounds. Four gateways from the CLI, each in the default configuration (as
 * shipped: `log.level` info, its stdout drained by the bench), one Redis, one OAuth issuer:
 *
 * - `plain`: nothing more;
 * - `governed`: `telemetry` to a real OTLP/HTTP receiver (bench/otlp-sink.ts) at sampling 1,
 *   `audit: { sink: file }`, and three CEL rules — one reads the arguments, one `jwt.groups`,
 *   and `allow-rest`;
 * - `governed 0.1`: the same at sampling 0.1;
 * - `metrics only`: `telemetry` at sampling 0, no audit, no rules.
 *
 * For each answer shape a v2 SDK server (chunked JSON) and a v1 one (one SSE event) give
 * (bench/fast-backend.ts `--answer`): closed-loop rounds of 16 connections, the order rotating
 * every round, CPU per call of each gateway process from /proc and calls/s; each ratio to
 * `plain` taken within a round, median over rounds. Then open-loop rounds at half the plain
 * gateway's throughput: p50 of each, minus plain's in the same round.
 *
 *   node --import tsx bench/governance.ts [--quick] [--rounds N] [--seconds S] [--profile] [--base-root DIR] [--built]
 *
 * `--built` runs every gateway from its checkout's `dist/cli.js`, as the image runs it (build
 * each checkout first), instead of src/cli.ts through tsx.
 *
 * `--base-root DIR` (a worktree of another commit, `git worktree add --detach DIR <commit>`
 * with node_modules linked in) adds `plain (base)`, `governed (base)` and `metrics only (base)`,
 * run from DIR's src/cli.ts in the same rounds: a before/after under the same noise.
 * `--profile` runs the `governed` gateway under `--cpu-prof` (its profile in
 * bench/results/profile-governance/; the figures of a profiled run are not comparable).
 * `npm run bench` runs this phase too (bench/run.ts), with its own processes.
 * Bounded: fixed rounds of fixed length; every child is stopped at the end.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChildHandle } from '../test/helpers/child.js';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { GOVERNANCE_RULES } from './governance-rules.js';
import { baseHeaders, closedLoop, median, openLoop, openPath, percentiles, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, startOtlpSink, type Backend, type Gateway } from './processes.js';
import { boundRun, checkErrors, cpuNow, type ErrorSink, log, round, sleep } from './sampling.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const GOVERNANCE_PROFILE_DIR = join(ROOT, 'bench', 'results', 'profile-governance');


export const CONFIGS = ['plain', 'governed', 'governed 0.1', 'metrics only'] as const;
/** With `--base-root DIR`: the same governed setups run from DIR's src/cli.ts (another commit), in the same rounds — a before/after under the same noise. */
const BASE_CONFIGS = ['plain (base)', 'governed (base)', 'metrics only (base)'] as const;
type BaseConfig = (typeof BASE_CONFIGS)[number];
const BASE_SUFFIX = ' (base)';
/** A `… (base)` configuration: the one named before the suffix, run from another checkout. */
const isBase = (which: string): which is BaseConfig => which.endsWith(BASE_SUFFIX);
/**
 * Governed at 0.1 taken apart, one part each (for bench/governance-profile.ts `--configs`; the
 * phase does not run them): which part's cost the profile's shares and /proc say it is.
 */
const PART_CONFIGS = ['telemetry only', 'telemetry 0.1 only', 'rules only', 'audit only'] as const;
export type GovernanceConfig = (typeof CONFIGS)[number] | BaseConfig | (typeof PART_CONFIGS)[number];
const GOVERNED = ['governed', 'governed 0.1', 'metrics only'] as const;
/** The configurations of this run: the four, and the base commit's two when asked for. */
let ACTIVE: readonly GovernanceConfig[] = CONFIGS;

export const GOVERNANCE_SHAPES = ['chunked', 'sse-one'] as const;
type Shape = (typeof GOVERNANCE_SHAPES)[number];

/** The issue's targets per configuration: CPU per call ÷ plain, added p50 at half load (ms), throughput ÷ plain. */
export const GOVERNANCE_TARGETS: Record<(typeof GOVERNED)[number], { cpuRatio: number; addedP50Ms?: number; throughputRatio?: number }> = {
  governed: { cpuRatio: 1.25, addedP50Ms: 0.1, throughputRatio: 0.8 },
  'governed 0.1': { cpuRatio: 1.1, addedP50Ms: 0.05, throughputRatio: 0.9 },
  'metrics only': { cpuRatio: 1.03 },
};

export interface GovernanceSettings {
  rounds: number;
  roundMs: number;
  warmupMs: number;
  latencyRounds: number;
  connections: number;
  profile: boolean;
  /** Gateways from `dist/cli.js` (`--built`), as deployed, not src/cli.ts through tsx. */
  built?: boolean;
}

export const QUICK_GOVERNANCE: GovernanceSettings = { rounds: 2, roundMs: 2000, warmupMs: 1500, latencyRounds: 1, connections: 16, profile: false };
export const FULL_GOVERNANCE: GovernanceSettings = { rounds: 5, roundMs: 4000, warmupMs: 3000, latencyRounds: 3, connections: 16, profile: false };

export interface ConfigFigures {
  callsPerSec: number;
  cpuUsPerCall: number;
  cpuRounds: number[];
  /** ÷ plain in the same round, median; 1 for plain. */
  cpuRatio: number;
  throughputRatio: number;
  /** Open loop at half plain's throughput. */
  p50ms: number;
  /** p50 minus plain's in the same round, median; 0 for plain. */
  addedP50ms: number;
  /**
   * CPU per call in the open loop (every gateway at the same arrival rate), ÷ plain's in the same
   * round, median. Beside the closed loop's ratio: there a slower gateway also leaves its peers
   * idle more often, so each of its writes more often wakes one, which its CPU pays (loopback).
   */
  halfLoadCpuRatio: number;
}

export interface ShapeFigures extends ErrorSink {
  halfLoadRate: number;
  configs: Record<GovernanceConfig, ConfigFigures>;
}

export interface GovernanceResults {
  settings: GovernanceSettings;
  shapes: Record<Shape, ShapeFigures>;
  /** What the collector received (requests and bytes by path): the spans did leave. */
  collector: Record<string, { requests: number; bytes: number }>;
  targets: Array<{ shape: Shape; config: GovernanceConfig; figure: string; value: number; target: number; pass: boolean }>;
}

/**
 * The checkout a configuration's gateway runs from: `baseRoot` for a `… (base)` one, which
 * cannot run without it; undefined (this checkout) for any other.
 */
export function rootOf(which: string, baseRoot: string | undefined): string | undefined {
  if (!isBase(which)) return undefined;
  if (!baseRoot) throw new Error(`${which} needs --base-root`);
  return baseRoot;
}

/** The extra config of each gateway (merged into bench/processes.ts startGateway's). */
export function configOf(which: GovernanceConfig, collector: string, auditFile: string): Record<string, unknown> {
  if (isBase(which)) return configOf(which.slice(0, -BASE_SUFFIX.length) as GovernanceConfig, collector, auditFile);
  const telemetry = (ratio: number) => ({ otlp: { endpoint: collector }, sampling: { ratio } });
  const governed = (ratio: number) => ({ telemetry: telemetry(ratio), audit: { sink: 'file', path: auditFile }, policy: { rules: GOVERNANCE_RULES } });
  switch (which) {
    case 'plain':
      return {};
    case 'governed':
      return governed(1);
    case 'governed 0.1':
      return governed(0.1);
    case 'metrics only':
      return { telemetry: telemetry(0) };
    case 'telemetry only':
      return { telemetry: telemetry(1) };
    case 'telemetry 0.1 only':
      return { telemetry: telemetry(0.1) };
    case 'rules only':
      return { policy: { rules: GOVERNANCE_RULES } };
    case 'audit only':
      return { audit: { sink: 'file', path: auditFile } };
  }
}

interface Running {
  backends: Backend[];
  gateways: Partial<Record<GovernanceConfig, Gateway>>;
  collector?: { child: ChildHandle; url: string };
  pools: Array<Path['pool']>;
  files: string[];
}

/**
 * The phase: starts its backends, collector and four gateways on the given Redis and issuer,
 * measures both shapes, stops what it started.
 */
export async function measureGovernance(s: GovernanceSettings, deps: { redisUrl: string; oauth: OAuthHandle }, baseRoot?: string): Promise<GovernanceResults> {
  ACTIVE = baseRoot ? [...CONFIGS, ...BASE_CONFIGS] : CONFIGS;
  const run: Running = { backends: [], gateways: {}, pools: [], files: [] };
  try {
    run.collector = await startOtlpSink();
    run.backends.push(...(await Promise.all(GOVERNANCE_SHAPES.map(async (shape) => ({ ...(await startBackend(false, false, shape)), name: `gov-${shape}` })))));
    if (s.profile) {
      mkdirSync(GOVERNANCE_PROFILE_DIR, { recursive: true });
      for (const f of readdirSync(GOVERNANCE_PROFILE_DIR)) if (f.endsWith('.cpuprofile')) rmSync(join(GOVERNANCE_PROFILE_DIR, f));
    }
    for (const which of ACTIVE) {
      const auditFile = join(tmpdir(), `switchboard-bench-audit-${process.pid}-${which.replace(/\W+/g, '-')}.jsonl`);
      run.files.push(auditFile);
      run.gateways[which] = await startGateway({
        redisUrl: deps.redisUrl,
        issuer: deps.oauth.issuer,
        backends: run.backends,
        logLevel: 'default',
        profileDir: s.profile && which === 'governed' ? GOVERNANCE_PROFILE_DIR : undefined,
        root: rootOf(which, baseRoot),
        built: s.built,
        extra: configOf(which, run.collector.url, auditFile),
      });
      log(`governance: gateway "${which}" on ${run.gateways[which]!.url} (pid ${run.gateways[which]!.child.pid})`);
    }
    const shapes = {} as Record<Shape, ShapeFigures>;
    for (const [i, shape] of GOVERNANCE_SHAPES.entries()) shapes[shape] = await measureShape(s, shape, run.backends[i]!, run, deps.oauth);
    const collector = (await (await fetch(`${run.collector.url}/counts`)).json()) as GovernanceResults['collector'];
    return { settings: s, shapes, collector, targets: targetsOf(shapes) };
  } finally {
    for (const p of run.pools) await p.close().catch(() => {});
    // A graceful stop is what writes the CPU profile.
    await Promise.allSettled([...Object.values(run.gateways).map((g) => g.child.stop()), ...run.backends.map((b) => b.child.stop()), run.collector?.child.stop()]);
    for (const g of Object.values(run.gateways)) removeConfigFile(g);
    for (const f of run.files) rmSync(f, { force: true });
  }
}

async function measureShape(s: GovernanceSettings, shape: Shape, backend: Backend, run: Running, oauth: OAuthHandle): Promise<ShapeFigures> {
  const paths = {} as Record<GovernanceConfig, Path>;
  const pids = {} as Record<GovernanceConfig, number>;
  for (const which of ACTIVE) {
    const gw = run.gateways[which]!;
    // `groups` is what the second rule reads.
    const token = await oauth.token({ sub: 'bench-user', aud: gw.audience, claims: { groups: ['bench', 'ops'] } });
    paths[which] = await openPath(`${which} ${shape}`, gw.url, `/mcp/${backend.name}`, baseHeaders(token));
    run.pools.push(paths[which].pool);
    pids[which] = gw.child.pid;
  }
  const sink: ErrorSink = { errors: 0 };
  log(`governance ${shape}: warm-up ${s.warmupMs} ms per gateway`);
  for (const which of ACTIVE) await closedLoop(paths[which], s.connections, { durationMs: s.warmupMs });
  const rate = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  const cpu = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  const cpuRatio = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  const rateRatio = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  for (let r = 0; r < s.rounds; r++) {
    for (const which of ACTIVE.map((_, i) => ACTIVE[(i + r) % ACTIVE.length]!)) {
      await sleep(200);
      const cpu0 = cpuNow(pids);
      const res = await closedLoop(paths[which], s.connections, { durationMs: s.roundMs });
      const cpu1 = cpuNow(pids);
      checkErrors(res, `governance ${shape} ${which} round ${r + 1}`, sink);
      rate[which].push((res.calls * 1000) / res.elapsedMs);
      cpu[which].push((cpu1[which]! - cpu0[which]!) / Math.max(1, res.calls));
    }
    for (const w of ACTIVE) {
      cpuRatio[w].push(cpu[w].at(-1)! / cpu.plain.at(-1)!);
      rateRatio[w].push(rate[w].at(-1)! / rate.plain.at(-1)!);
    }
    log(`governance ${shape} round ${r + 1}/${s.rounds}: ${ACTIVE.map((w) => `${w} ${rate[w].at(-1)!.toFixed(0)}/s ${cpu[w].at(-1)!.toFixed(0)} µs/call (÷ ${cpuRatio[w].at(-1)!.toFixed(3)})`).join(', ')}`);
  }
  // Half the plain gateway's throughput, as the issue's table; rounded to 50/s.
  const halfLoadRate = Math.max(50, Math.round(median(rate.plain) / 2 / 50) * 50);
  const p50 = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  const added = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  const openCpu = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  const openCpuRatio = Object.fromEntries(ACTIVE.map((w) => [w, [] as number[]])) as Record<GovernanceConfig, number[]>;
  for (let r = 0; r < s.latencyRounds; r++) {
    for (const which of ACTIVE.map((_, i) => ACTIVE[(i + r) % ACTIVE.length]!)) {
      await sleep(200);
      const cpu0 = cpuNow(pids);
      const res = await openLoop(paths[which], halfLoadRate, s.roundMs);
      const cpu1 = cpuNow(pids);
      checkErrors(res, `governance ${shape} ${which} open loop round ${r + 1}`, sink);
      p50[which].push(percentiles(res.latencies, [50])[0]!);
      openCpu[which].push((cpu1[which]! - cpu0[which]!) / Math.max(1, res.calls));
    }
    for (const w of ACTIVE) {
      added[w].push(p50[w].at(-1)! - p50.plain.at(-1)!);
      openCpuRatio[w].push(openCpu[w].at(-1)! / openCpu.plain.at(-1)!);
    }
    log(`governance ${shape} open loop ${r + 1}/${s.latencyRounds} @ ${halfLoadRate}/s: p50 ${ACTIVE.map((w) => `${w} ${p50[w].at(-1)!.toFixed(3)}`).join(', ')} ms`);
  }
  const configs = Object.fromEntries(
    ACTIVE.map((w) => [
      w,
      {
        callsPerSec: median(rate[w]),
        cpuUsPerCall: median(cpu[w]),
        cpuRounds: cpu[w].map((x) => round(x, 1)!),
        cpuRatio: median(cpuRatio[w]),
        throughputRatio: median(rateRatio[w]),
        p50ms: median(p50[w]),
        addedP50ms: median(added[w]),
        halfLoadCpuRatio: median(openCpuRatio[w]),
      } satisfies ConfigFigures,
    ]),
  ) as Record<GovernanceConfig, ConfigFigures>;
  for (const p of Object.values(paths)) await p.pool.close().catch(() => {});
  return { halfLoadRate, configs, ...sink };
}

function targetsOf(shapes: Record<Shape, ShapeFigures>): GovernanceResults['targets'] {
  const out: GovernanceResults['targets'] = [];
  for (const shape of GOVERNANCE_SHAPES) {
    for (const config of GOVERNED) {
      const f = shapes[shape].configs[config];
      const t = GOVERNANCE_TARGETS[config];
      out.push({ shape, config, figure: 'CPU per call ÷ plain', value: f.cpuRatio, target: t.cpuRatio, pass: f.cpuRatio <= t.cpuRatio });
      if (t.addedP50Ms !== undefined) out.push({ shape, config, figure: 'added p50 at half load (ms)', value: f.addedP50ms, target: t.addedP50Ms, pass: f.addedP50ms <= t.addedP50Ms });
      if (t.throughputRatio !== undefined) out.push({ shape, config, figure: 'throughput ÷ plain', value: f.throughputRatio, target: t.throughputRatio, pass: f.throughputRatio >= t.throughputRatio });
    }
  }
  return out;
}

/** The phase's table: one row per shape and configuration. */
export function governanceTable(r: GovernanceResults): string {
  const rows = ['| answer | configuration | calls/s | CPU per call | ÷ plain | throughput ÷ plain | p50 at half load | added p50 | CPU at half load ÷ plain |', '|---|---|---|---|---|---|---|---|---|'];
  for (const shape of GOVERNANCE_SHAPES) {
    const s = r.shapes[shape];
    for (const w of ACTIVE) {
      const f = s.configs[w];
      rows.push(`| ${shape} | ${w} | ${f.callsPerSec.toFixed(0)} | ${f.cpuUsPerCall.toFixed(0)} µs | ${f.cpuRatio.toFixed(3)} | ${f.throughputRatio.toFixed(3)} | ${f.p50ms.toFixed(3)} ms @ ${s.halfLoadRate}/s | ${w === 'plain' ? '—' : `${f.addedP50ms >= 0 ? '+' : ''}${f.addedP50ms.toFixed(3)} ms`} | ${f.halfLoadCpuRatio.toFixed(3)} |`);
    }
  }
  const targets = r.targets.map((t) => `${t.pass ? 'PASS' : 'FAIL'} ${t.shape} ${t.config}: ${t.figure} ${t.value.toFixed(3)} (target ${t.figure.startsWith('throughput') ? '≥' : '≤'} ${t.target})`);
  const collector = Object.entries(r.collector).map(([path, c]) => `${path} ${c.requests} posts, ${(c.bytes / 1e6).toFixed(1)} MB`).join('; ');
  return `${rows.join('\n')}\n\n${targets.join('\n')}\ncollector received: ${collector || 'nothing'}`;
}

/** Prints the phase's table and writes its figures to bench/results/governance-latest.json. */
export function reportGovernance(results: GovernanceResults): void {
  process.stdout.write(`\n${governanceTable(results)}\n`);
  const out = join(ROOT, 'bench', 'results', 'governance-latest.json');
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
  writeFileSync(out, `${JSON.stringify({ date: new Date().toISOString(), loadavg: loadavg(), ...results }, (_k, v: unknown) => (typeof v === 'number' && !Number.isInteger(v) ? round(v, 4) : v), 2)}\n`);
  process.stdout.write(`wrote ${out}\n`);
}

function parseArgs(argv: string[]): GovernanceSettings {
  const s = { ...(argv.includes('--quick') ? QUICK_GOVERNANCE : FULL_GOVERNANCE), profile: argv.includes('--profile'), built: argv.includes('--built') };
  const at = (flag: string) => (argv.includes(flag) ? Number(argv[argv.indexOf(flag) + 1]) : undefined);
  s.rounds = at('--rounds') ?? s.rounds;
  s.latencyRounds = at('--latency-rounds') ?? s.latencyRounds;
  s.roundMs = (at('--seconds') ?? s.roundMs / 1000) * 1000;
  return s;
}

async function main(): Promise<void> {
  const s = parseArgs(process.argv.slice(2));
  boundRun(900_000, 'the governance run exceeded 15 minutes');
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  let redis: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  try {
    [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
    const baseAt = process.argv.indexOf('--base-root');
    reportGovernance(await measureGovernance(s, { redisUrl: redis.url, oauth }, baseAt > 0 ? process.argv[baseAt + 1] : undefined));
  } finally {
    await Promise.allSettled([oauth?.stop(), redis?.stop()]);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`governance bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
