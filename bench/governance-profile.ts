/**
 * Where governance's extra CPU per call goes (issue 44 part 1): the governance phase's gateways
 * (bench/governance.ts: plain, metrics only, governed, …) each under `--cpu-prof`, loaded in the
 * same closed-loop rounds (16 connections, the order rotating) on the phase's backends (chunked
 * JSON and one SSE event), then each profile read over its own gateway's load windows and
 * compared with plain's per call (bench/profile-diff.ts): self time by file and by function,
 * inclusive time by function, µs per call. Profiles are proportions of what ran, so they
 * survive a busy machine better than absolute CPU: each gateway's samples are scaled to its
 * CPU per call from /proc in the same windows (profile-diff.ts scaledCosts), so a function's
 * figure is its share of what that gateway spent. The figures of a profiled run are not the
 * phase's figures.
 *
 *   node --import tsx bench/governance-profile.ts [--configs "plain,metrics only,governed"] [--shapes chunked,sse-one]
 *        [--rounds N] [--seconds S] [--top N] [--base-root DIR] [--built]
 *
 * `--base-root DIR` (a worktree of another commit) makes the `(base)` configurations runnable
 * (e.g. `--configs "plain,metrics only,metrics only (base)"`). Profiles land in
 * bench/results/profile-governance/<config>/; the comparison is printed and written to
 * bench/results/governance-profile.txt. Bounded: fixed rounds; every child is stopped at the end.
 */
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { configOf, GOVERNANCE_PROFILE_DIR, rootOf, GOVERNANCE_SHAPES, type GovernanceConfig } from './governance.js';
import { baseHeaders, closedLoop, openPath, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, startOtlpSink, type Backend, type Gateway } from './processes.js';
import { isMainThreadProfile } from './profile.js';
import { callCosts, compareCosts, scaledCosts } from './profile-diff.js';
import { boundRun, cpuNow, log, sleep } from './sampling.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

interface Options {
  configs: GovernanceConfig[];
  shapes: string[];
  rounds: number;
  roundMs: number;
  top: number;
  baseRoot?: string;
  /** `--built`: gateways from `dist/cli.js`, as the image runs them (bench/processes.ts startGateway). */
  built: boolean;
}

function parseArgs(argv: string[]): Options {
  const at = (flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);
  const configs = (at('--configs') ?? 'plain,metrics only,governed').split(',').map((c) => c.trim()) as GovernanceConfig[];
  if (configs[0] !== 'plain') throw new Error('--configs must start with plain (the others are compared with it)');
  return {
    configs,
    shapes: (at('--shapes') ?? GOVERNANCE_SHAPES.join(',')).split(','),
    rounds: Number(at('--rounds') ?? 4),
    roundMs: Number(at('--seconds') ?? 4) * 1000,
    top: Number(at('--top') ?? 25),
    baseRoot: at('--base-root'),
    built: argv.includes('--built'),
  };
}

const slug = (s: string) => s.replace(/\W+/g, '-').replace(/-$/, '');

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  boundRun(1_200_000, 'the governance profile run exceeded 20 minutes');
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  let redis: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  const backends: Backend[] = [];
  const gateways = new Map<GovernanceConfig, Gateway>();
  const pools: Array<Path['pool']> = [];
  const files: string[] = [];
  let sink: Awaited<ReturnType<typeof startOtlpSink>> | undefined;
  const load0 = loadavg();
  // Per shape and config: when it was loaded, and how many calls it served then.
  const windows = new Map<string, Array<[number, number]>>();
  const calls = new Map<string, number>();
  // The process's CPU (/proc) in the same windows: what the profile's wall-clock samples are scaled to.
  const cpuUs = new Map<string, number>();
  try {
    [redis, oauth, sink] = await Promise.all([startRedis(), startOAuthServer(), startOtlpSink()]);
    for (const shape of o.shapes) backends.push({ ...(await startBackend(false, false, shape as 'chunked' | 'sse-one')), name: `gov-${shape}` });
    for (const which of o.configs) {
      const dir = join(GOVERNANCE_PROFILE_DIR, slug(which));
      mkdirSync(dir, { recursive: true });
      for (const f of readdirSync(dir)) rmSync(join(dir, f), { force: true });
      const auditFile = join(tmpdir(), `switchboard-bench-audit-${process.pid}-${slug(which)}.jsonl`);
      files.push(auditFile);
      const root = rootOf(which, o.baseRoot);
      gateways.set(which, await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends, logLevel: 'default', profileDir: dir, root, built: o.built, extra: configOf(which, sink.url, auditFile) }));
      log(`gateway "${which}" pid ${gateways.get(which)!.child.pid}`);
    }
    for (const [i, shape] of o.shapes.entries()) {
      const paths = new Map<GovernanceConfig, Path>();
      for (const which of o.configs) {
        const gw = gateways.get(which)!;
        const token = await oauth.token({ sub: 'bench-user', aud: gw.audience, claims: { groups: ['bench', 'ops'] } });
        const p = await openPath(`${which} ${shape}`, gw.url, `/mcp/${backends[i]!.name}`, baseHeaders(token));
        pools.push(p.pool);
        paths.set(which, p);
      }
      // Warm-up, not counted: the JIT settles.
      for (const which of o.configs) await closedLoop(paths.get(which)!, 16, { durationMs: 2000 });
      for (let r = 0; r < o.rounds; r++) {
        for (const which of o.configs.map((_, k) => o.configs[(k + r) % o.configs.length]!)) {
          await sleep(200);
          const key = `${shape}\u0000${which}`;
          const pid = { [which]: gateways.get(which)!.child.pid };
          const cpu0 = cpuNow(pid)[which]!;
          const start = nowUs();
          const res = await closedLoop(paths.get(which)!, 16, { durationMs: o.roundMs });
          windows.set(key, [...(windows.get(key) ?? []), [start, nowUs()]]);
          cpuUs.set(key, (cpuUs.get(key) ?? 0) + cpuNow(pid)[which]! - cpu0);
          calls.set(key, (calls.get(key) ?? 0) + res.calls);
          if (res.errors) log(`WARNING ${key}: ${res.errors} failed calls (${res.firstError})`);
        }
        log(`${shape} round ${r + 1}/${o.rounds} done, load ${loadavg()[0]!.toFixed(2)}`);
      }
    }
  } finally {
    for (const p of pools) await p.close().catch(() => {});
    // A graceful stop is what writes the profiles.
    await Promise.allSettled([...[...gateways.values()].map((g) => g.child.stop()), ...backends.map((b) => b.child.stop()), sink?.child.stop()]);
    for (const g of gateways.values()) removeConfigFile(g);
    for (const f of files) rmSync(f, { force: true });
    await Promise.allSettled([oauth?.stop(), redis?.stop()]);
  }
  const profileOf = (which: GovernanceConfig) => {
    const dir = join(GOVERNANCE_PROFILE_DIR, slug(which));
    const main = readdirSync(dir).filter(isMainThreadProfile).map((f) => join(dir, f)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
    if (!main) throw new Error(`no main-thread profile for ${which} in ${dir}`);
    return main;
  };
  const out: string[] = [`governance profile, ${new Date().toISOString()}, load average at start ${load0.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg().map((x) => x.toFixed(2)).join(' ')}; ${o.rounds} rounds × ${o.roundMs / 1000} s, 16 connections`];
  for (const shape of o.shapes) {
    const costs = (which: GovernanceConfig) => {
      const key = `${shape}\u0000${which}`;
      const n = calls.get(key) ?? 0;
      return scaledCosts(callCosts(profileOf(which), n, windows.get(key)), (cpuUs.get(key) ?? 0) / Math.max(1, n));
    };
    const plain = costs('plain');
    out.push(`\n${shape}: CPU per call (/proc, profiled, all rounds) ${o.configs.map((w) => `${w} ${((cpuUs.get(`${shape}\u0000${w}`) ?? 0) / Math.max(1, calls.get(`${shape}\u0000${w}`) ?? 0)).toFixed(0)} µs`).join(', ')}`);
    for (const which of o.configs.slice(1)) out.push(`\n=== ${shape}: ${which} ===\n${compareCosts('plain', plain, which, costs(which), o.top)}`);
  }
  const text = `${out.join('\n')}\n`;
  process.stdout.write(text);
  writeFileSync(join(ROOT, 'bench', 'results', 'governance-profile.txt'), text);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`governance profile failed: ${(err as Error)?.stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
