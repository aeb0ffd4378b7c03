/**
 * Where a governed call's CPU goes besides its instructions (issue 44 part 1): CPU per call split
 * into user and kernel time, with context switches, for the governance phase's gateways
 * (bench/governance.ts configOf) under the same closed-loop load in turns; and, with
 * `--allocation`, the JavaScript heap each call allocates.
 *
 * Why: bench/governance-instructions.ts counts a governed call's instructions at 1.20× a plain
 * call's (sampling 0.1), while the CPU phase measures about 1.3×. This says which part of the
 * difference is the kernel (system calls, the audit file's and the span export's writes), which
 * the young generation's collections, and which is left to user time per instruction.
 *
 *   node --import tsx bench/governance-split.ts [--configs "plain,governed 0.1,metrics only"] [--calls N] [--rounds R] [--allocation]
 *
 * `--allocation` runs each gateway with `--trace-gc` at log level `warn` (the access log would
 * crowd the collections out of the kept output), and sums what each scavenge found allocated
 * since the one before; the CPU figures of that run are then those of a gateway without its
 * access log. Figures print per round, since this machine's CPU time moves by tens of percent
 * from one window to the next (docs/performance.md): only ratios within a round compare.
 * Bounded: fixed rounds of fixed calls; every child is stopped at the end.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { configOf, type GovernanceConfig } from './governance.js';
import { baseHeaders, closedLoop, openPath, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, startOtlpSink, type Gateway } from './processes.js';
import { processCpuSplitUs } from './system.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const at = (flag: string) => (process.argv.includes(flag) ? process.argv[process.argv.indexOf(flag) + 1] : undefined);
const configs = (at('--configs') ?? 'plain,governed 0.1,metrics only').split(',').map((c) => c.trim()) as GovernanceConfig[];
const CALLS = Number(at('--calls') ?? 20_000);
const ROUNDS = Number(at('--rounds') ?? 3);
const allocation = process.argv.includes('--allocation');
/** As the CPU phase loads its gateways (bench/governance.ts FULL_GOVERNANCE). */
const CONNECTIONS = 16;

interface Sample {
  userUs: number;
  systemUs: number;
  switches: number;
}

/** A process's CPU so far and its context switches (voluntary and not), from /proc. */
function sample(pid: number): Sample {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const count = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  return { ...processCpuSplitUs(pid), switches: count('voluntary_ctxt_switches') + count('nonvoluntary_ctxt_switches') };
}

/** `--trace-gc`'s line for a scavenge: the heap's size before and after, in MB. */
const SCAVENGE = /: Scavenge[^\d]*([\d.]+) \([\d.]+\) -> ([\d.]+) \(/;

/**
 * The MB the heap grew by between the scavenges logged after `seen` (a line of the log before
 * the round): each scavenge's size before, less the size the one before it left. Undefined when
 * the round saw fewer than two.
 */
function allocatedMb(log: string, seen: string | undefined): { mb: number; scavenges: number } | undefined {
  const lines = log.split('\n').filter((l) => SCAVENGE.test(l));
  const from = seen === undefined ? 0 : lines.lastIndexOf(seen) + 1;
  let mb = 0;
  let previousAfter: number | undefined;
  let scavenges = 0;
  for (const line of lines.slice(from)) {
    const m = SCAVENGE.exec(line)!;
    if (previousAfter !== undefined) {
      mb += Number(m[1]) - previousAfter;
      scavenges++;
    }
    previousAfter = Number(m[2]);
  }
  return scavenges ? { mb, scavenges } : undefined;
}

const lastScavenge = (log: string) => log.split('\n').filter((l) => SCAVENGE.test(l)).at(-1);

console.log('building dist/ …');
execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
const redis = await startRedis();
const oauth = await startOAuthServer();
const collector = await startOtlpSink();
const backend = { ...(await startBackend(false, false, 'chunked')), name: 'gov-chunked' };
const running: Array<{ which: GovernanceConfig; gw: Gateway; path: Path; auditFile: string }> = [];
try {
  for (const [i, which] of configs.entries()) {
    const auditFile = join(tmpdir(), `switchboard-bench-split-${process.pid}-${i}.jsonl`);
    const gw = await startGateway({
      redisUrl: redis.url,
      issuer: oauth.issuer,
      backends: [backend],
      logLevel: allocation ? 'warn' : 'default',
      built: true,
      extra: configOf(which, collector.url, auditFile),
      nodeArgs: allocation ? ['--trace-gc'] : [],
    });
    const token = await oauth.token({ sub: 'bench-user', aud: gw.audience, claims: { groups: ['bench', 'ops'] } });
    running.push({ which, gw, path: await openPath(which, gw.url, `/mcp/${backend.name}`, baseHeaders(token)), auditFile });
  }
  for (const r of running) await closedLoop(r.path, CONNECTIONS, { count: CALLS });
  for (let round = 1; round <= ROUNDS; round++) {
    const plain: { cpu?: number } = {};
    for (const { which, gw, path } of running) {
      const seen = allocation ? lastScavenge(gw.child.logs()) : undefined;
      const before = sample(gw.child.pid);
      const res = await closedLoop(path, CONNECTIONS, { count: CALLS });
      const after = sample(gw.child.pid);
      if (res.errors) throw new Error(`${which}: ${res.errors} calls failed (${res.firstError})`);
      const per = (k: keyof Sample) => (after[k] - before[k]) / res.calls;
      const cpu = per('userUs') + per('systemUs');
      if (which === 'plain') plain.cpu = cpu;
      const heap = allocation ? allocatedMb(gw.child.logs(), seen) : undefined;
      const heapText = heap ? `  heap ${((heap.mb * 1024) / res.calls).toFixed(1)} KB a call (${heap.scavenges} scavenges)` : '';
      const ratio = plain.cpu ? ` (÷ plain ${(cpu / plain.cpu).toFixed(3)})` : '';
      console.log(`round ${round}/${ROUNDS} ${which.padEnd(16)} user ${per('userUs').toFixed(1)} µs  kernel ${per('systemUs').toFixed(1)} µs  = ${cpu.toFixed(1)} µs a call${ratio}  switches ${per('switches').toFixed(3)}${heapText}`);
    }
  }
} finally {
  for (const r of running) await r.path.pool.close().catch(() => {});
  await Promise.allSettled([...running.map((r) => r.gw.child.stop()), backend.child.stop(), collector.child.stop(), oauth.stop(), redis.stop()]);
  for (const r of running) {
    removeConfigFile(r.gw);
    rmSync(r.auditFile, { force: true });
  }
}
