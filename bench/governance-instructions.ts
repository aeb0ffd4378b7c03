/**
 * Governance on against off, counted in instructions per call (issue 44 part 1): the phase's
 * gateways (bench/governance.ts configOf: plain, governed, …) under valgrind's callgrind
 * (bench/callgrind.ts), each loaded in turn with the same `tools/call` on one of the phase's
 * backends (chunked JSON, or one SSE event with `--shape sse-one`), with a real OTLP receiver
 * and the audit file. CPU per call on this shared
 * machine moves by tens of percent between windows of a few seconds (docs/performance.md); a
 * count repeats to a fraction of a percent, so a change that saves 1 % of a governed call shows,
 * and the functions whose counts grew most say where governance's instructions go.
 *
 * What a count leaves out: the kernel (system calls, loopback wake-ups), and V8's optimizing
 * compiler and garbage collector (printed apart). So the ratio here is the user-space share of
 * the CPU ratio the phase measures, not that ratio itself.
 *
 *   node --import tsx bench/governance-instructions.ts [--configs "plain,governed,metrics only"] [--base-root DIR] [--shape chunked|sse-one]
 *
 * A configuration named `… (base)` runs from `--base-root` (a worktree of another commit, its
 * `dist/` built), so a change is counted before and after in one run: the plain gateway's own
 * count moves by 10 % from one run to the next, more than most changes.
 *   (environment: WARM_CALLS, CALLS, ROUNDS; KEEP_JIT_MAPS=1 keeps each gateway's JIT map beside its dumps)
 *
 * Writes bench/results/governance-instructions.json. Bounded: fixed rounds of fixed calls; every
 * child is stopped at the end.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { callgrindWrap, COLLECTING, COMPILING, CountedGateway, largestDifferences, ownInstructions, prepareCounting, quietest, type Counts } from './callgrind.js';
import { configOf, rootOf, type GovernanceConfig } from './governance.js';
import { baseHeaders, closedLoop, openPath, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, startOtlpSink, type Gateway } from './processes.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WARM_CALLS = Number(process.env.WARM_CALLS ?? 10_000);
const CALLS = Number(process.env.CALLS ?? 2000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const TOP = 40;

const at = (flag: string) => (process.argv.includes(flag) ? process.argv[process.argv.indexOf(flag) + 1] : undefined);
const configs = (at('--configs') ?? 'plain,governed').split(',').map((c) => c.trim()) as GovernanceConfig[];
const baseRoot = at('--base-root');
/** The backend's answer: chunked JSON (v2 SDK servers, the default) or one SSE event (v1 SDK servers). */
const shape = (at('--shape') ?? 'chunked') as 'chunked' | 'sse-one';
if (shape !== 'chunked' && shape !== 'sse-one') throw new Error(`--shape must be chunked or sse-one (got ${String(shape)})`);
// Before anything starts: a `… (base)` configuration without --base-root is refused.
for (const which of configs) rootOf(which, baseRoot);
if (configs[0] !== 'plain') throw new Error('--configs must start with plain (the others are compared with it)');

const dumps = prepareCounting('bench/governance-instructions.ts', 'callgrind-governance');
process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
const redis = await startRedis();
const oauth = await startOAuthServer();
const collector = await startOtlpSink();
const backend = { ...(await startBackend(false, false, shape)), name: `gov-${shape}` };
const gateways: Array<{ which: GovernanceConfig; gw: Gateway; counted: CountedGateway; auditFile: string }> = [];
try {
  for (const [i, which] of configs.entries()) {
    const auditFile = join(tmpdir(), `switchboard-bench-audit-${process.pid}-${i}.jsonl`);
    console.log(`starting "${which}" under callgrind …`);
    const gw = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], logLevel: 'default', wrap: callgrindWrap(dumps, `-${i}`), root: rootOf(which, baseRoot), extra: asLoaded(configOf(which, collector.url, auditFile)) });
    gateways.push({ which, gw, counted: new CountedGateway(gw.child.pid!, dumps), auditFile });
  }
  const paths = new Map<GovernanceConfig, Path>();
  for (const { which, gw } of gateways) {
    const token = await oauth.token({ sub: 'bench-user', aud: gw.audience, claims: { groups: ['bench', 'ops'] } });
    paths.set(which, await openPath(which, gw.url, `/mcp/${backend.name}`, baseHeaders(token)));
  }
  for (let k = 0; k < 2; k++) for (const p of paths.values()) await closedLoop(p, 4, { count: WARM_CALLS });
  const perCall = new Map<GovernanceConfig, Counts[]>(configs.map((c) => [c, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const { which, counted } of gateways) {
      // The gateway closes a connection idle past its keep-alive timeout while the others are
      // counted (minutes under valgrind): a few calls first find which were closed.
      await closedLoop(paths.get(which)!, 4, { count: 16 });
      const counts = await counted.count(`${which.replace(/\W+/g, '-')}-${r}`, async () => {
        const res = await closedLoop(paths.get(which)!, 4, { count: CALLS });
        if (res.errors) throw new Error(`${which}: ${res.errors} calls failed (${res.firstError})`);
        return res.calls;
      });
      perCall.get(which)!.push(counts);
      console.log(`round ${r + 1}/${ROUNDS} ${which.padEnd(14)} ${(ownInstructions(counts) / 1000).toFixed(1)} k instructions per call (compiler ${((counts.get(COMPILING) ?? 0) / 1000).toFixed(1)} k, collector ${((counts.get(COLLECTING) ?? 0) / 1000).toFixed(1)} k)`);
    }
  }
  report(perCall);
} finally {
  await Promise.allSettled([...gateways.map((g) => g.gw.child.stop()), backend.child.stop(), collector.child.stop()]);
  for (const g of gateways) {
    g.counted.cleanUp();
    removeConfigFile(g.gw);
    rmSync(g.auditFile, { force: true });
  }
  await oauth.stop();
  await redis.stop();
}

/**
 * A configuration as a loaded gateway runs it. Under callgrind a gateway serves a few dozen calls
 * a second, where the CPU phase's serves about 2,000: work done once per interval weighs some
 * forty times more per call here. The audit file's batch is such work — written when 64 KiB are
 * held or `audit.flushInterval` after its first record (ops/audit-file.ts) — so at the default
 * 100 ms a counted gateway wrote a batch every few records (about 3 k instructions a call in
 * the timer, the write and its callback), where the loaded gateway fills 64 KiB (about 145
 * records) first. The longest interval the config allows, 1 s, brings the count close to that.
 */
function asLoaded(extra: Record<string, unknown>): Record<string, unknown> {
  const audit = extra.audit as Record<string, unknown> | undefined;
  return audit?.sink === 'file' ? { ...extra, audit: { ...audit, flushInterval: '1s' } } : extra;
}

function report(perCall: Map<GovernanceConfig, Counts[]>): void {
  const plain = quietest(perCall.get('plain')!);
  const base = ownInstructions(plain);
  const figures: Record<string, { instructionsPerCall: number; ratioToPlain: number; collectorPerCall: number; rounds: number[] }> = {};
  const differences: Record<string, Array<[string, number]>> = {};
  console.log('\ninstructions per call (the round with the least compiling; without the compiler and the collector):');
  for (const [which, rounds] of perCall) {
    const round = quietest(rounds);
    const total = ownInstructions(round);
    figures[which] = { instructionsPerCall: Math.round(total), ratioToPlain: Number((total / base).toFixed(4)), collectorPerCall: Math.round(round.get(COLLECTING) ?? 0), rounds: rounds.map((c) => Math.round(ownInstructions(c))) };
    console.log(`  ${which.padEnd(14)} ${(total / 1000).toFixed(1).padStart(7)} k   ÷ plain ${(total / base).toFixed(3)}   (collector ${((round.get(COLLECTING) ?? 0) / 1000).toFixed(1)} k)`);
  }
  for (const [which, rounds] of perCall) {
    if (which === 'plain') continue;
    differences[which] = largestDifferences(plain, quietest(rounds), TOP);
    console.log(`\n${which} − plain, the ${TOP} largest differences (instructions per call):`);
    for (const [k, d] of differences[which]) console.log(`  ${String(d).padStart(7)}  ${k}`);
  }
  const out = join(ROOT, 'bench', 'results', 'governance-instructions.json');
  writeFileSync(out, `${JSON.stringify({ date: new Date().toISOString(), shape, calls: CALLS, rounds: ROUNDS, figures, differences }, null, 2)}\n`);
  console.log(`\nwritten to ${out}`);
}
