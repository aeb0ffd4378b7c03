/**
 * Counting a gateway's instructions per call under valgrind's callgrind: what
 * `npm run bench:instructions` (instructions.ts, the eras' calls) and
 * bench/governance-instructions.ts (governance on against off) share. A count repeats to a
 * fraction of a percent where CPU time on this shared machine moves by tens of percent from one
 * window to the next (docs/performance.md), so a change of 1 % shows.
 *
 * The gateway runs `dist/` with `--single-threaded` (V8 compiles and collects on the main
 * thread, where callgrind counts it in order) and `--perf-basic-prof` (the map that names
 * JIT-compiled functions). Instrumentation is off until a round starts and off again after it.
 * V8's optimizing compiler and garbage collector are counted apart from a call's own
 * instructions: when either runs depends on timing and on the rounds before, not on the call.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GatewayWrap } from './processes.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** V8's optimizing compilers, by the names of their C++ code. */
const COMPILER = /compiler::|maglev|Maglev|turboshaft|Turboshaft|::Compil|RegisterAlloc|InstructionSelector|MoveOptimizer|Scheduler::/;
/** V8's garbage collector (and the pages it maps), by the same. */
const COLLECTOR = /Sweep|MarkCompact|Marking|MarkingVisitor|Evacuat|Compactor|ActiveSystemPages|MemoryAllocator|heap::base::|Scaveng|MinorMC|GlobalHandles|__popcount|SizeFromMap|BodyDescriptor|Heap::|PagedSpace|FreeList|RememberedSet|SlotSet|MemoryChunk|LargeObjectSpace|NewSpace|SemiSpace|Worklist/;
export const COMPILING = '(V8 optimizing compiler)';
export const COLLECTING = '(V8 garbage collector)';

/** Instructions per call by function name (JIT code named from V8's perf map). */
export type Counts = Map<string, number>;

/**
 * What a counting bench does first: exits with how to install valgrind when it is missing, builds
 * `dist/` (which the counted gateways run), and empties `bench/results/<dumps>/`, returned.
 */
export function prepareCounting(bench: string, dumps: string): string {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch {
    console.error(`${bench} needs valgrind: apt-get install -y valgrind`);
    process.exit(1);
  }
  console.log('building dist/ …');
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
  const dir = join(ROOT, 'bench', 'results', dumps);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** How startGateway runs a gateway under callgrind, its dumps in `dir`. */
export function callgrindWrap(dir: string, tag = ''): GatewayWrap {
  return {
    command: ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${dir}/callgrind${tag}.out.%p`],
    // --perf-basic-prof also starts V8's log, which would land in the working directory.
    // --no-memory-reducer, --no-flush-bytecode: a counted gateway idles for minutes while the
    // others are counted; V8's memory reducer then runs full collections that drop its compiled
    // code (and bytecode idle that long goes too), and the next round compiled everything again
    // (up to 1.3 M compiler instructions a call). A gateway under load never idles so.
    nodeArgs: ['--single-threaded', '--no-flush-bytecode', '--no-memory-reducer', '--perf-basic-prof', '--no-logfile-per-isolate', `--logfile=${join(dir, `v8${tag}.log`)}`],
  };
}

/** One counted gateway process: rounds of calls between instrumentation on and off, each read back by function. */
export class CountedGateway {
  constructor(
    private readonly pid: number,
    private readonly dir: string,
  ) {}

  /** Counts what `calls` does, per call made; `label` names the round's dump. */
  async count(label: string, calls: () => Promise<number>): Promise<Counts> {
    this.#control('-z');
    this.#control('-i', 'on');
    const made = await calls();
    this.#control('-i', 'off');
    this.#control(`--dump=${label}`);
    // Read again each round: V8 reuses the addresses of code it dropped, the newest entry names what ran.
    return byFunction(await this.#dumpFile(label), made, readJitNames(`/tmp/perf-${this.pid}.map`));
  }

  /**
   * Removes the JIT map V8 wrote for this process; with `KEEP_JIT_MAPS=1` moves it beside the
   * dumps first (`perf-<pid>.map`), to name the callers in a dump afterwards.
   */
  cleanUp(): void {
    const map = `/tmp/perf-${this.pid}.map`;
    if (process.env.KEEP_JIT_MAPS === '1' && existsSync(map)) copyFileSync(map, join(this.dir, `perf-${this.pid}.map`));
    rmSync(map, { force: true });
  }

  #control(...args: string[]): void {
    execFileSync('callgrind_control', [...args, String(this.pid)], { stdio: 'ignore' });
  }

  /** The dump `callgrind_control --dump=label` wrote (its header names the trigger; only heads are read, a dump is megabytes). */
  async #dumpFile(label: string): Promise<string> {
    for (let tries = 0; tries < 50; tries++) {
      const found = readdirSync(this.dir)
        .map((f) => join(this.dir, f))
        .find((file) => file.includes(`.out.${this.pid}`) && headOf(file).includes(`Trigger: dump ${label}\n`));
      if (found) return found;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`no callgrind dump for ${label} of ${this.pid} in ${this.dir}`);
  }
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
function byFunction(file: string, calls: number, jitName: (address: number) => string | undefined): Counts {
  const text = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const counts: Counts = new Map();
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
export function ownInstructions(counts: Counts): number {
  let total = 0;
  for (const [name, n] of counts) if (name !== COMPILING && name !== COLLECTING) total += n;
  return total;
}

/**
 * The round in which V8's compiler ran least: under valgrind it keeps recompiling now and then
 * long after the warm-up, and what it leaves (deoptimized frames, code it replaces) costs the
 * round's calls more than the compiler's own count shows.
 */
export function quietest(rounds: readonly Counts[]): Counts {
  return rounds.reduce((a, b) => ((b.get(COMPILING) ?? 0) < (a.get(COMPILING) ?? 0) ? b : a));
}

/** The `top` functions whose instructions per call differ most between two rounds' counts (compiler and collector left out). */
export function largestDifferences(a: Counts, b: Counts, top: number): Array<[string, number]> {
  const keys = new Set([...a.keys(), ...b.keys()]);
  keys.delete(COMPILING);
  keys.delete(COLLECTING);
  return [...keys].map((k): [string, number] => [k, Math.round((b.get(k) ?? 0) - (a.get(k) ?? 0))]).sort((x, y) => Math.abs(y[1]) - Math.abs(x[1])).slice(0, top);
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
