/**
 * `npm run bench:compare -- [ref] [--sse | --answer chunked|sse-one|sse-progress] [--rounds N] [--seconds S] [--log-level L] [--autocannon]`
 * (defaults: HEAD, JSON answers, 16 rounds of 1 s after 12 s of warm-up, `silent`, undici
 * load): is the working tree's hot path cheaper than `ref`'s (default HEAD)? `--log-level
 * default` (or `info`) compares both at the level the gateway ships with (their stdout is
 * read and dropped by this process, as a log collector would); `--autocannon` drives both
 * with the second load generator (bench/autocannon.ts) instead of undici. `--answer <shape>`
 * puts a backend answering in that SDK server's shape (bench/shapes.ts) behind both.
 *
 * On a shared, noisy machine the absolute figures of `npm run bench` move by tens of percent
 * between runs, which hides any single change. This runs two gateways side by side — one
 * from a temporary git worktree of `ref`, one from the working tree — against the same
 * Redis, issuer and backend, and alternates short closed-loop rounds between them (the order
 * flips every round). Noise then hits both alike, and the per-round ratios (working ÷ ref) of
 * CPU per call and of calls/s have a tight median. The worktree is removed afterwards. It
 * shares this checkout's node_modules unless `ref`'s package-lock.json differs, in which case
 * it gets its own `npm ci`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { autocannonLoop } from './autocannon.js';
import { baseHeaders, closedLoop, median, openPath, type LoopResult, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, type Backend, type Gateway } from './processes.js';
import { SHAPES, type Shape } from './shapes.js';
import { processCpuUs } from './system.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const log = (line: string) => process.stderr.write(`[compare ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function option(argv: string[], flag: string, fallback: number): number {
  const i = argv.indexOf(flag);
  if (i < 0) return fallback;
  const v = Number(argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} needs a positive number`);
  return v;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const ref = argv.find((a, i) => !a.startsWith('--') && !['--rounds', '--seconds', '--log-level', '--answer'].includes(argv[i - 1] ?? '')) ?? 'HEAD';
  const answer = argv.includes('--answer') ? (argv[argv.indexOf('--answer') + 1] as Shape) : undefined;
  if (answer !== undefined && !SHAPES.includes(answer)) throw new Error(`--answer must be one of ${SHAPES.join(', ')}`);
  const logLevel = argv.includes('--log-level') ? argv[argv.indexOf('--log-level') + 1] : undefined;
  const sse = argv.includes('--sse');
  const rounds = option(argv, '--rounds', 16);
  const roundMs = option(argv, '--seconds', 1) * 1000;
  const connections = 16;
  const loop = argv.includes('--autocannon') ? autocannonLoop : (p: Path, c: number, ms: number): Promise<LoopResult> => closedLoop(p, c, { durationMs: ms });

  const commit = execFileSync('git', ['rev-parse', '--short', ref], { cwd: ROOT, encoding: 'utf8' }).trim();
  const worktree = mkdtempSync(join(tmpdir(), `switchboard-compare-${commit}-`));
  rmSync(worktree, { recursive: true });
  execFileSync('git', ['worktree', 'add', '--detach', worktree, commit], { cwd: ROOT, stdio: 'ignore' });
  // Same dependencies for both when the lock file agrees (the comparison is about the
  // gateway's code); a ref with other dependencies gets its own install.
  const sameLock = spawnSync('git', ['diff', '--quiet', commit, '--', 'package-lock.json'], { cwd: ROOT }).status === 0;
  if (sameLock) symlinkSync(join(ROOT, 'node_modules'), join(worktree, 'node_modules'));
  else {
    log(`${commit} has other dependencies: npm ci in its worktree (about a minute)`);
    execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: worktree, stdio: 'ignore' });
  }

  let redis: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  let backend: Backend | undefined;
  const gateways: Gateway[] = [];
  const pools: Array<Path['pool']> = [];
  try {
    process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
    [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
    backend = answer ? { ...(await startBackend(false, false, answer)), name: `fast-${answer}` } : await startBackend(sse);
    for (const root of [worktree, ROOT]) gateways.push(await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], root, logLevel }));
    const paths: Path[] = [];
    for (const [i, g] of gateways.entries()) {
      const headers = baseHeaders(await oauth.token({ sub: 'bench-user', aud: g.audience }));
      const p = await openPath(i === 0 ? `ref ${commit}` : 'working tree', g.url, `/mcp/${backend.name ?? (sse ? 'fast-sse' : 'fast')}`, headers);
      pools.push(p.pool);
      paths.push(p);
    }
    const kind = answer ?? (sse ? 'SSE' : 'JSON');
    log(`${kind} answers, ${rounds} rounds × ${roundMs / 1000} s per gateway, ${connections} connections, ${argv.includes('--autocannon') ? 'autocannon' : 'undici'}; warming up`);
    // Until both are JIT-warm: a gateway's first seconds under load cost far more per call.
    for (let w = 0; w < 4; w++) for (const p of paths) await loop(p, connections, 1500);

    const cpu: number[][] = [[], []];
    const rate: number[][] = [[], []];
    for (let r = 0; r < rounds; r++) {
      for (const i of r % 2 === 0 ? [0, 1] : [1, 0]) {
        await sleep(100);
        const before = processCpuUs(gateways[i]!.child.pid);
        const res = await loop(paths[i]!, connections, roundMs);
        if (res.errors) throw new Error(`${paths[i]!.label}: ${res.errors} failed calls (${res.firstError})`);
        cpu[i]!.push((processCpuUs(gateways[i]!.child.pid) - before) / res.calls);
        rate[i]!.push((res.calls * 1000) / res.elapsedMs);
      }
      log(`round ${r + 1}/${rounds}: ref ${cpu[0]!.at(-1)!.toFixed(0)} µs/call ${rate[0]!.at(-1)!.toFixed(0)}/s, working ${cpu[1]!.at(-1)!.toFixed(0)} µs/call ${rate[1]!.at(-1)!.toFixed(0)}/s`);
    }
    const cpuRatio = median(cpu[1]!.map((c, r) => c / cpu[0]![r]!));
    const rateRatio = median(rate[1]!.map((c, r) => c / rate[0]![r]!));
    process.stdout.write(
      `\n${kind} tools/call, working tree vs ${commit}:\n` +
        `  CPU per call   ref ${median(cpu[0]!).toFixed(0)} µs, working ${median(cpu[1]!).toFixed(0)} µs, median per-round ratio ${cpuRatio.toFixed(3)}\n` +
        `  calls/s        ref ${median(rate[0]!).toFixed(0)}, working ${median(rate[1]!).toFixed(0)}, median per-round ratio ${rateRatio.toFixed(3)}\n`,
    );
  } finally {
    for (const p of pools) await p.close().catch(() => {});
    await Promise.allSettled([...gateways.map((g) => g.child.stop()), backend?.child.stop(), oauth?.stop(), redis?.stop()]);
    for (const g of gateways) removeConfigFile(g);
    execFileSync('git', ['worktree', 'remove', '--force', worktree], { cwd: ROOT, stdio: 'ignore' });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`compare failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
