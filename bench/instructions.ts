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
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { callgrindWrap, COLLECTING, COMPILING, CountedGateway, largestDifferences, ownInstructions, prepareCounting, quietest, type Counts } from './callgrind.js';
import { baseHeaders, closedLoop, openPath, type Path } from './load.js';
import { startBackend, startGateway } from './processes.js';
import { NATIVE_BACKEND, sizedSessionPath, statelessPath } from './stateless.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WARM_CALLS = Number(process.env.WARM_CALLS ?? 15_000);
const CALLS = Number(process.env.CALLS ?? 3000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const TOP = 25;

const dumps = prepareCounting('bench:instructions', 'callgrind');
process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
const redis = await startRedis();
const oauth = await startOAuthServer();
const backend = await startBackend(false);
console.log('starting the gateway under callgrind …');
const gw = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], logLevel: 'silent', wrap: callgrindWrap(dumps) });
const counted = new CountedGateway(gw.child.pid!, dumps);
try {
  const token = await oauth.token({ sub: 'bench-user', aud: gw.audience });
  const session = await openPath('session', gw.url, '/mcp/fast', baseHeaders(token));
  const paths: Record<string, Path> = { session, sized: sizedSessionPath(session), native: statelessPath(session, `/mcp/${NATIVE_BACKEND}`), bridged: statelessPath(session) };
  for (let k = 0; k < 2; k++) for (const p of Object.values(paths)) await closedLoop(p, 4, { count: WARM_CALLS });
  const perCall: Record<string, Counts[]> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, p] of Object.entries(paths)) {
      const counts = await counted.count(`${name}-${r}`, async () => {
        const res = await closedLoop(p, 4, { count: CALLS });
        if (res.errors) throw new Error(`${name}: ${res.errors} calls failed (${res.firstError})`);
        return res.calls;
      });
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
  counted.cleanUp();
}

function report(perCall: Record<string, Counts[]>): void {
  const base = ownInstructions(quietest(perCall.session!));
  const figures: Record<string, { instructionsPerCall: number; ratioToSession: number; collectorPerCall: number; rounds: number[] }> = {};
  console.log('\ninstructions per call (the round with the least compiling; without the compiler and the collector):');
  for (const name of Object.keys(perCall)) {
    const round = quietest(perCall[name]!);
    const total = ownInstructions(round);
    figures[name] = { instructionsPerCall: Math.round(total), ratioToSession: Number((total / base).toFixed(4)), collectorPerCall: Math.round(round.get(COLLECTING) ?? 0), rounds: perCall[name]!.map((c) => Math.round(ownInstructions(c))) };
    console.log(`  ${name.padEnd(8)} ${(total / 1000).toFixed(1).padStart(7)} k   ÷ session ${(total / base).toFixed(3)}   (collector ${((round.get(COLLECTING) ?? 0) / 1000).toFixed(1)} k)`);
  }
  const differences: Record<string, Array<[string, number]>> = {};
  for (const name of Object.keys(perCall).filter((n) => n !== 'session')) {
    differences[name] = largestDifferences(quietest(perCall.session!), quietest(perCall[name]!), TOP);
    console.log(`\n${name} − session, the ${TOP} largest differences (instructions per call):`);
    for (const [k, d] of differences[name]) console.log(`  ${String(d).padStart(7)}  ${k}`);
  }
  const out = join(ROOT, 'bench', 'results', 'instructions.json');
  writeFileSync(out, `${JSON.stringify({ date: new Date().toISOString(), calls: CALLS, rounds: ROUNDS, figures, differences }, null, 2)}\n`);
  console.log(`\nwritten to ${out}`);
}
