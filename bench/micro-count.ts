/**
 * One hot function counted in instructions per call, apart from the gateway (issue 44 part 1):
 * a case of bench/micro-cases.ts, bundled by esbuild (as the gateway's code runs, no tsx loader in
 * between), run under valgrind's callgrind twice — N and 2N calls after the same warm-up — and
 * the difference divided by N. What the process does besides the calls (start, compiling, the
 * warm-up) is the same in both runs and cancels out; a count repeats to a few instructions, so a
 * change of a few percent in one function shows, where CPU time on this machine moves by tens of
 * percent (docs/performance.md). `--time` also runs the bundle without valgrind for ns a call.
 *
 *   node --import tsx bench/micro-count.ts <case>[,<case>…] [--calls N] [--time] [--root DIR]
 *
 * `--root DIR` counts the cases of another worktree's `src/` (its bench/micro-cases.ts), for a
 * before and after. valgrind runs with `--smc-check=all-non-file` (JIT code is rewritten in
 * place; without it callgrind may count stale translations) and node with `--single-threaded`
 * (V8 compiles on the main thread, so both runs compile the same). Bounded: two runs of fixed
 * length per case.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { MICRO_CASES } from './micro-cases.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const at = (flag: string) => (process.argv.includes(flag) ? process.argv[process.argv.indexOf(flag) + 1] : undefined);
const names = (process.argv[2] ?? '').split(',').filter(Boolean);
const calls = Number(at('--calls') ?? 20_000);
const root = resolve(at('--root') ?? ROOT);

if (!names.length || names.some((n) => !(n in MICRO_CASES))) {
  console.error(`usage: node --import tsx bench/micro-count.ts <case>[,<case>…] [--calls N] [--time] [--root DIR]\ncases: ${Object.keys(MICRO_CASES).join(', ')}`);
  process.exit(2);
}
try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('bench/micro-count.ts needs valgrind: apt-get install -y valgrind');
  process.exit(1);
}

/** Instructions valgrind counted for one run of the bundle with `n` calls (its summary is on stderr). */
function counted(bundle: string, name: string, n: number): number {
  const run = spawnSync('valgrind', ['--tool=callgrind', '--smc-check=all-non-file', '--callgrind-out-file=/dev/null', process.execPath, '--single-threaded', bundle, name, String(n)], { encoding: 'utf8', timeout: 600_000 });
  const refs = /I\s+refs:\s+([\d,]+)/.exec(run.stderr ?? '');
  if (run.status !== 0 || !refs) throw new Error(`case ${name} failed under valgrind (status ${run.status}):\n${run.stderr}`);
  return Number(refs[1]!.replaceAll(',', ''));
}

const dir = mkdtempSync(join(tmpdir(), 'switchboard-micro-'));
try {
  const bundle = join(dir, 'micro.mjs');
  await build({ entryPoints: [join(root, 'bench', 'micro-cases.ts')], bundle: true, platform: 'node', format: 'esm', outfile: bundle, logLevel: 'warning',
    // The packages are bundled too (the bundle runs from a temporary folder); their `require`s of Node's modules need one.
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" } });
  for (const name of names) {
    const once = counted(bundle, name, calls);
    const twice = counted(bundle, name, 2 * calls);
    let line = `${name.padEnd(16)} ${((twice - once) / calls).toFixed(0).padStart(7)} instructions a call`;
    if (process.argv.includes('--time')) {
      const out = execFileSync(process.execPath, [bundle, name, String(10 * calls), '--time'], { encoding: 'utf8' });
      line += `   ${out.trim()}`;
    }
    console.log(line);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
