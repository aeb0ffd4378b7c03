/**
 * The governance gateways compared in many short interleaved windows (issue 44 part 1): a
 * before/after that holds on a machine whose speed drifts. On the shared 2-core host the plain
 * gateway's closed-loop throughput moved from 1,900 to 5,700 calls/s between two 4-second
 * rounds of one run (bench/governance.ts), so a ratio of two such rounds says little. Here each
 * configuration gets a short window (500 ms by default) in turn, cycle after cycle, the order
 * rotating, so a slow spell falls on every configuration alike; CPU (from /proc) and calls are
 * summed over all windows, and each configuration's CPU per call is divided by plain's.
 * The per-cycle ratios' median and quartiles say how much the ratio itself moves.
 *
 * Two loads, each in its own cycles: closed loop (16 connections, as the phase's ratio) and an
 * open loop at a fixed rate for every configuration (`--rate`, default 1500/s), where no
 * gateway's own speed changes how often its peers sleep.
 *
 *   node --import tsx bench/governance-ab.ts [--configs "plain,governed,governed (base)"] [--shape chunked|sse-one]
 *        [--cycles N] [--window-ms MS] [--rate R] [--base-root DIR] [--built]
 *
 * Bounded: a fixed number of cycles; every child is stopped at the end.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { configOf, rootOf, type GovernanceConfig } from './governance.js';
import { baseHeaders, closedLoop, openLoop, openPath, percentiles, type LoopResult, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, startOtlpSink, type Backend, type Gateway } from './processes.js';
import { boundRun, cpuNow, log, sleep } from './sampling.js';

interface Options {
  configs: GovernanceConfig[];
  shape: 'chunked' | 'sse-one';
  cycles: number;
  windowMs: number;
  rate: number;
  baseRoot?: string;
  built: boolean;
}

function parseArgs(argv: string[]): Options {
  const at = (flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);
  const configs = (at('--configs') ?? 'plain,governed,governed 0.1,metrics only').split(',').map((c) => c.trim()) as GovernanceConfig[];
  if (configs[0] !== 'plain') throw new Error('--configs must start with plain (the others are compared with it)');
  return {
    configs,
    shape: (at('--shape') ?? 'chunked') as Options['shape'],
    cycles: Number(at('--cycles') ?? 40),
    windowMs: Number(at('--window-ms') ?? 500),
    rate: Number(at('--rate') ?? 1500),
    baseRoot: at('--base-root'),
    built: argv.includes('--built'),
  };
}

/** Totals of one configuration under one load, and the ratio to plain of each cycle. */
interface Tally {
  cpuUs: number;
  calls: number;
  errors: number;
  cycleRatios: number[];
}

/** Cycles of one load over every configuration, rotating; each window's CPU and calls added to its tally. */
async function cycles(o: Options, paths: Map<GovernanceConfig, Path>, pids: Record<string, number>, load: (p: Path) => Promise<LoopResult>, what: string): Promise<Map<GovernanceConfig, Tally>> {
  const tallies = new Map(o.configs.map((w) => [w, { cpuUs: 0, calls: 0, errors: 0, cycleRatios: [] } as Tally]));
  for (let c = 0; c < o.cycles; c++) {
    const perCall = new Map<GovernanceConfig, number>();
    for (const which of o.configs.map((_, k) => o.configs[(k + c) % o.configs.length]!)) {
      await sleep(50);
      const cpu0 = cpuNow(pids)[which]!;
      const res = await load(paths.get(which)!);
      const cpu = cpuNow(pids)[which]! - cpu0;
      const t = tallies.get(which)!;
      t.cpuUs += cpu;
      t.calls += res.calls;
      t.errors += res.errors;
      perCall.set(which, cpu / Math.max(1, res.calls));
    }
    for (const w of o.configs) tallies.get(w)!.cycleRatios.push(perCall.get(w)! / perCall.get('plain')!);
    if ((c + 1) % 10 === 0) log(`${what}: cycle ${c + 1}/${o.cycles}`);
  }
  return tallies;
}

function table(o: Options, what: string, tallies: Map<GovernanceConfig, Tally>): string {
  const plain = tallies.get('plain')!;
  const plainPerCall = plain.cpuUs / Math.max(1, plain.calls);
  const rows = [`${what} (${o.shape}, ${o.cycles} cycles of ${o.windowMs} ms per configuration):`, '| configuration | calls | CPU per call | ÷ plain (totals) | ÷ plain per cycle: q1 / median / q3 | failed |', '|---|---|---|---|---|---|'];
  for (const w of o.configs) {
    const t = tallies.get(w)!;
    const perCall = t.cpuUs / Math.max(1, t.calls);
    const [q1, m, q3] = percentiles(Float64Array.from(t.cycleRatios), [25, 50, 75]) as [number, number, number];
    rows.push(`| ${w} | ${t.calls} | ${perCall.toFixed(1)} µs | ${(perCall / plainPerCall).toFixed(3)} | ${q1.toFixed(3)} / ${m.toFixed(3)} / ${q3.toFixed(3)} | ${t.errors} |`);
  }
  return rows.join('\n');
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  boundRun(1_800_000, 'the A/B run exceeded 30 minutes');
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  let redis: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  let backend: Backend | undefined;
  let sink: Awaited<ReturnType<typeof startOtlpSink>> | undefined;
  const gateways = new Map<GovernanceConfig, Gateway>();
  const paths = new Map<GovernanceConfig, Path>();
  const files: string[] = [];
  try {
    [redis, oauth, sink] = await Promise.all([startRedis(), startOAuthServer(), startOtlpSink()]);
    backend = { ...(await startBackend(false, false, o.shape)), name: `gov-${o.shape}` };
    for (const which of o.configs) {
      const auditFile = join(tmpdir(), `switchboard-bench-ab-${process.pid}-${which.replace(/\W+/g, '-')}.jsonl`);
      files.push(auditFile);
      const root = rootOf(which, o.baseRoot);
      const gw = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], logLevel: 'default', root, built: o.built, extra: configOf(which, sink.url, auditFile) });
      gateways.set(which, gw);
      const token = await oauth.token({ sub: 'bench-user', aud: gw.audience, claims: { groups: ['bench', 'ops'] } });
      paths.set(which, await openPath(`${which} ${o.shape}`, gw.url, `/mcp/${backend.name}`, baseHeaders(token)));
    }
    const pids = Object.fromEntries([...gateways].map(([w, g]) => [w, g.child.pid]));
    // Warm-up, not counted: the JIT settles.
    for (const p of paths.values()) await closedLoop(p, 16, { durationMs: 2000 });
    const closed = await cycles(o, paths, pids, (p) => closedLoop(p, 16, { durationMs: o.windowMs }), 'closed loop');
    const open = await cycles(o, paths, pids, (p) => openLoop(p, o.rate, o.windowMs), `open loop at ${o.rate}/s`);
    process.stdout.write(`\n${table(o, 'closed loop, 16 connections', closed)}\n\n${table(o, `open loop at ${o.rate}/s`, open)}\n`);
  } finally {
    for (const p of paths.values()) await p.pool.close().catch(() => {});
    await Promise.allSettled([...[...gateways.values()].map((g) => g.child.stop()), backend?.child.stop(), sink?.child.stop()]);
    for (const g of gateways.values()) removeConfigFile(g);
    for (const f of files) rmSync(f, { force: true });
    await Promise.allSettled([oauth?.stop(), redis?.stop()]);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
