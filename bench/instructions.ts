/**
 * Instructions per call, counted: the gateway under valgrind's callgrind, the eras' `tools/call`
 * compared by what the CPU is asked to do rather than by the time it took. CPU time per call
 * (bench/stateless.ts) moves ±6 % from round to round on a shared machine; an instruction count
 * repeats to a fraction of a percent, so a 1 % change can be seen (issue 15).
 *
 * ```sh
 * apt-get install -y valgrind
 * npm run bench:instructions        # about ten minutes: the gateway runs ~50× slower
 * ```
 *
 * The gateway is the one the image runs (`dist/`, built first), with `--single-threaded` (V8
 * compiles and collects on the main thread, where callgrind counts it in order) and
 * `--perf-basic-prof` (the map that names JIT-compiled functions). Each path is warmed, then
 * counted in rounds of N calls between `callgrind_control`'s instrumentation on and off. The
 * figure is each path's round with the least compiling, without V8's optimizing compiler and
 * garbage collector (printed apart): when either runs depends on timing and on the rounds
 * before, not on the call (bench/README.md, "Instructions per call").
 *
 * Paths (bench/stateless.ts): `session`, `sized`, `native` and `bridged` as there; `sized` is
 * the 2025 session call as big as the 2026 request (its `_meta` bytes under names the gateway
 * passes on unread, as many header lines), so sized ÷ session is what the bigger request costs.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { baseHeaders, closedLoop, openPath, type Path } from './load.js';
import { startBackend, startGateway } from './processes.js';
import { NATIVE_BACKEND, sizedSessionPath, statelessPath } from './stateless.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WARM_CALLS = Number(process.env.WARM_CALLS ?? 15_000);
const CALLS = Number(process.env.CALLS ?? 3000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const TOP = 25;

/** V8's optimizing compilers, by the names of their C++ code. */
const COMPILER = /compiler::|maglev|Maglev|turboshaft|Turboshaft|::Compil|RegisterAlloc|InstructionSelector|MoveOptimizer|Scheduler::/;
/** V8's garbage collector (and the pages it maps), by the same. */
const COLLECTOR = /Sweep|MarkCompact|Marking|MarkingVisitor|Evacuat|Compactor|ActiveSystemPages|MemoryAllocator|heap::base::|Scaveng|MinorMC|GlobalHandles|__popcount|SizeFromMap|BodyDescriptor|Heap::|PagedSpace|FreeList|RememberedSet|SlotSet|MemoryChunk|LargeObjectSpace|NewSpace|SemiSpace|Worklist/;
const COMPILING = '(V8 optimizing compiler)';
const COLLECTING = '(V8 garbage collector)';

try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('bench:instructions needs valgrind: apt-get install -y valgrind');
  process.exit(1);
}
console.log('building dist/ …');
execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });

const dumps = join(ROOT, 'bench', 'results', 'callgrind');
rmSync(dumps, { recursive: true, force: true });
mkdirSync(dumps, { recursive: true });
process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
const redis = await startRedis();
const oauth = await startOAuthServer();
const backend = await startBackend(false);
console.log('starting the gateway under callgrind …');
const gw = await startGateway({
  redisUrl: redis.url,
  issuer: oauth.issuer,
  backends: [backend],
  logLevel: 'silent',
  wrap: {
    command: ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${dumps}/callgrind.out.%p`],
    // --perf-basic-prof also starts V8's log, which would land in the working directory.
    nodeArgs: ['--single-threaded', '--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${join(dumps, 'v8.log')}`],
  },
});
const pid = String(gw.child.pid);
try {
  const token = await oauth.token({ sub: 'bench-user', aud: gw.audience });
  const session = await openPath('session', gw.url, '/mcp/fast', baseHeaders(token));
  const paths: Record<string, Path> = { session, sized: sizedSessionPath(session), native: statelessPath(session, `/mcp/${NATIVE_BACKEND}`), bridged: statelessPath(session) };
  for (let k = 0; k < 2; k++) for (const p of Object.values(paths)) await closedLoop(p, 4, { count: WARM_CALLS });
  const perCall: Record<string, Array<Map<string, number>>> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, p] of Object.entries(paths)) {
      callgrindControl('-z');
      callgrindControl('-i', 'on');
      const res = await closedLoop(p, 4, { count: CALLS });
      callgrindControl('-i', 'off');
      if (res.errors) throw new Error(`${name}: ${res.errors} calls failed (${res.firstError})`);
      const label = `${name}-${r}`;
      callgrindControl(`--dump=${label}`);
      // Read again each round: V8 reuses the addresses of code it dropped, the newest entry names what ran.
      const counts = byFunction(await dumpFile(label), res.calls, readJitNames(`/tmp/perf-${pid}.map`));
      (perCall[name] ??= []).push(counts);
      console.log(`round ${r + 1}/${ROUNDS} ${name.padEnd(8)} ${(ownInstructions(counts) / 1000).toFixed(1)} k instructions per call (compiler ${((counts.get(COMPILING) ?? 0) / 1000).toFixed(1)} k)`);
    }
  }
  report(perCall);
} finally {
  await gw.child.stop();
  await backend.child.stop();
  await oauth.stop();
  await redis.stop();
  rmSync(`/tmp/perf-${pid}.map`, { force: true });
}

function callgrindControl(...args: string[]): void {
  execFileSync('callgrind_control', [...args, pid], { stdio: 'ignore' });
}

/** The dump `callgrind_control --dump=label` wrote (its header names the trigger; only heads are read, a dump is megabytes). */
async function dumpFile(label: string): Promise<string> {
  for (let tries = 0; tries < 50; tries++) {
    const found = readdirSync(dumps)
      .map((f) => join(dumps, f))
      .find((file) => headOf(file).includes(`Trigger: dump ${label}\n`));
    if (found) return found;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no callgrind dump for ${label} in ${dumps}`);
}

function headOf(file: string): string {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(2000);
    return head.toString('utf8', 0, readSync(fd, head, 0, head.length, 0));
  } finally {
    closeSync(fd);
  }
}

/** Instructions per call by function, JIT code named from V8's perf map. */
function byFunction(file: string, calls: number, jitName: (address: number) => string | undefined): Map<string, number> {
  const text = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+)\s+\([^)]*\)\s+(.*)$/.exec(line);
    if (!m || line.includes('PROGRAM TOTALS')) continue;
    const raw = m[2]!.replace(/^\?\?\?:/, '').replace(/\s*\[\/usr\/bin\/node\]$/, '');
    const jit = /^(0x[0-9a-f]+)(?:'\d+)? \[\?\?\?\]/.exec(raw);
    let name = jit ? (jitName(Number.parseInt(jit[1]!, 16)) ?? '(JIT code, unnamed)') : raw.replace(/\(.*$/, '').slice(0, 100);
    if (COMPILER.test(name)) name = COMPILING;
    else if (COLLECTOR.test(name)) name = COLLECTING;
    counts.set(name, (counts.get(name) ?? 0) + Number(m[1]!.replaceAll(',', '')) / calls);
  }
  return counts;
}

/** A call's own instructions: without the compiler and the collector, whose runs fall into one round or another. */
function ownInstructions(counts: Map<string, number>): number {
  let total = 0;
  for (const [name, n] of counts) if (name !== COMPILING && name !== COLLECTING) total += n;
  return total;
}

/** Names JIT code by address: `--perf-basic-prof` writes `start size name` lines, the newest last. */
function readJitNames(mapFile: string): (address: number) => string | undefined {
  if (!existsSync(mapFile)) return () => undefined;
  const entries = readFileSync(mapFile, 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .filter((p) => p.length >= 3)
    .map(([start, size, ...name]) => ({ start: Number.parseInt(start!, 16), end: Number.parseInt(start!, 16) + Number.parseInt(size!, 16), name: name.join(' ') }));
  return (address) => {
    let found: (typeof entries)[number] | undefined;
    for (let i = entries.length - 1; i >= 0 && !found; i--) if (entries[i]!.start <= address && address < entries[i]!.end) found = entries[i];
    return found ? `[JS] ${found.name.replace(/^(JS|LazyCompile|Function):/, '').replace(`file://${ROOT}dist/`, '').replace(/^.*node_modules\//, '')}` : undefined;
  };
}

function report(perCall: Record<string, Array<Map<string, number>>>): void {
  // The round in which V8's compiler ran least: under valgrind it keeps recompiling now and
  // then long after the warm-up, and what it leaves (deoptimized frames, code it replaces)
  // costs the round's calls more than the compiler's own count shows.
  const quietest = (name: string) => perCall[name]!.reduce((a, b) => ((b.get(COMPILING) ?? 0) < (a.get(COMPILING) ?? 0) ? b : a));
  const base = ownInstructions(quietest('session'));
  const figures: Record<string, { instructionsPerCall: number; ratioToSession: number; collectorPerCall: number; rounds: number[] }> = {};
  console.log('\ninstructions per call (the round with the least compiling; without the compiler and the collector):');
  for (const name of Object.keys(perCall)) {
    const round = quietest(name);
    const total = ownInstructions(round);
    figures[name] = { instructionsPerCall: Math.round(total), ratioToSession: Number((total / base).toFixed(4)), collectorPerCall: Math.round(round.get(COLLECTING) ?? 0), rounds: perCall[name]!.map((c) => Math.round(ownInstructions(c))) };
    console.log(`  ${name.padEnd(8)} ${(total / 1000).toFixed(1).padStart(7)} k   ÷ session ${(total / base).toFixed(3)}   (collector ${((round.get(COLLECTING) ?? 0) / 1000).toFixed(1)} k)`);
  }
  const differences: Record<string, Array<[string, number]>> = {};
  for (const name of Object.keys(perCall).filter((n) => n !== 'session')) {
    const a = quietest('session');
    const b = quietest(name);
    const keys = new Set([...a.keys(), ...b.keys()]);
    keys.delete(COMPILING);
    keys.delete(COLLECTING);
    differences[name] = [...keys].map((k): [string, number] => [k, Math.round((b.get(k) ?? 0) - (a.get(k) ?? 0))]).sort((x, y) => Math.abs(y[1]) - Math.abs(x[1])).slice(0, TOP);
    console.log(`\n${name} − session, the ${TOP} largest differences (instructions per call):`);
    for (const [k, d] of differences[name]) console.log(`  ${String(d).padStart(7)}  ${k}`);
  }
  const out = join(ROOT, 'bench', 'results', 'instructions.json');
  writeFileSync(out, `${JSON.stringify({ date: new Date().toISOString(), calls: CALLS, rounds: ROUNDS, figures, differences }, null, 2)}\n`);
  console.log(`\nwritten to ${out}`);
}
