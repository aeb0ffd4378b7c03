/**
 * `npm run bench [-- --quick] [-- --profile]`: Switchboard's overhead against talking to
 * the backend directly and against a naive pass-through, measured in one run on loopback
 * (issues 7 and 16). See bench/README.md.
 *
 * Parts, each its own process except the load generators: a real Redis, a real OAuth
 * issuer, the minimal backend (bench/fast-backend.ts; one answering tools/call as JSON, one
 * as a one-event SSE stream), the naive pass-through in front of each, and two Switchboards
 * started from the CLI: one in the default configuration (as shipped: `log.level` info, its
 * stdout drained by the bench; the headline) and one `silent`. The same tools/call load goes
 * to all four paths in the same rounds, under two load generators (undici and autocannon);
 * figures are medians over rounds, ratios are taken within a round.
 *
 * This file starts and stops the processes and runs the phases in order; the phases are
 * bench/throughput.ts, latency.ts, redis-trips.ts, cluster.ts and sessions.ts, the report
 * bench/report.ts and the targets bench/targets.ts.
 */
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import type { ChildHandle } from '../test/helpers/child.js';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { autocannonLoop } from './autocannon.js';
import { calibrate, type Calibration } from './calibrate.js';
import { measureClusterCpu, startClusterGateway, type ClusterGateway } from './cluster.js';
import { halfLoadLatency } from './latency.js';
import { measureStateless } from './stateless.js';
import { measureVirtual, openVirtualPaths, VIRTUAL_SERVERS } from './virtual-phase.js';
import { FULL_GOVERNANCE, measureGovernance, QUICK_GOVERNANCE, reportGovernance } from './governance.js';
import { FULL_STDIO, measureStdio, QUICK_STDIO, reportStdio } from './stdio.js';
import { baseHeaders, closedLoop, createPool, openPath, type Path } from './load.js';
import { removeConfigFile, startBackend, startGateway, startNaiveProxy, type Backend, type Gateway } from './processes.js';
import { formatProfile, isMainThreadProfile, summarizeProfile, type ProfileSummary } from './profile.js';
import { measureRoundTrips } from './redis-trips.js';
import { cpuShares, resultsTable, targetsTable } from './report.js';
import { boundRun, log, profiledWindows, round } from './sampling.js';
import { measureShapes, shapePids, startShapeProcesses, SHAPES, type ShapeProcesses } from './shapes.js';
import { measureIdleStreams, measureNewSessions, measureStoredSessions, memorySampler, MEMORY_USERS } from './sessions.js';
import { SETTLE_BOUNDS } from './settled-memory.js';
import { parseArgs, type Settings } from './settings.js';
import { fdLimit, gitState, machineInfo, redisInfoField } from './system.js';
import { targetsOf, type ModeResults, type RunResults } from './targets.js';
import { measureThroughput, type Generator, type Processes, type Which } from './throughput.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const RESULTS = join(ROOT, 'bench', 'results');
const PROFILE_DIR = join(RESULTS, 'profile');
const MODES = ['json', 'sse'] as const;
type Mode = (typeof MODES)[number];

/** Every process and connection of a run, so that `finally` can stop what was started. */
interface Running {
  redis?: RedisHandle;
  oauth?: OAuthHandle;
  backends: Backend[];
  naive: Array<{ child: ChildHandle; port: number }>;
  gateway?: Gateway;
  silent?: Gateway;
  cluster?: ClusterGateway;
  shapes?: ShapeProcesses;
  pools: Array<Path['pool']>;
  stats?: Redis;
}

function generators(s: Settings): Generator[] {
  return [
    { name: 'undici', run: (p, c, ms) => closedLoop(p, c, { durationMs: ms }), rounds: s.throughputRounds, durationMs: s.throughputMs, warmupMs: s.warmupMs },
    // The paths are JIT-warm from the undici rounds; autocannon's own connections are new.
    { name: 'autocannon', run: autocannonLoop, rounds: s.autocannonRounds, durationMs: s.autocannonMs, warmupMs: 1000 },
  ];
}

/** The four paths of one answer type, each with its own pool and session. */
async function openPaths(run: Running, mode: Mode, headers: Record<string, string>, silentHeaders: Record<string, string>): Promise<Record<Which, Path>> {
  const backend = run.backends[mode === 'json' ? 0 : 1]!;
  const gwPath = `/mcp/${backend.sse ? 'fast-sse' : 'fast'}`;
  const direct = await openPath(`direct ${mode}`, `http://127.0.0.1:${backend.port}`, '/mcp', headers);
  const paths: Record<Which, Path> = {
    direct,
    naive: await openPath(`naive ${mode}`, `http://127.0.0.1:${run.naive[mode === 'json' ? 0 : 1]!.port}`, gwPath, headers, direct.headers['mcp-session-id']),
    gateway: await openPath(`gateway ${mode}`, run.gateway!.url, gwPath, headers),
    silent: await openPath(`silent gateway ${mode}`, run.silent!.url, gwPath, silentHeaders),
  };
  run.pools.push(...Object.values(paths).map((p) => p.pool));
  return paths;
}

/** Throughput under both generators, half-load latency, Redis round trips: one answer type. */
async function measureMode(s: Settings, mode: Mode, paths: Record<Which, Path>, pids: Record<string, number>, run: Running) {
  const procs: Processes = { pids, server: { direct: mode === 'json' ? 'backendJson' : 'backendSse', naive: mode === 'json' ? 'naiveJson' : 'naiveSse', gateway: 'gateway', silent: 'silent' } };
  const opts = { label: mode.toUpperCase(), connections: s.connections, profile: s.profile };
  const [undici, autocannon] = generators(s);
  const throughput = await measureThroughput(undici!, paths, procs, run.stats!, opts);
  const ac = await measureThroughput(autocannon!, paths, procs, run.stats!, opts);
  const latency = await halfLoadLatency(paths, { gateway: pids.gateway!, silent: pids.silent! }, throughput.paths.gateway.callsPerSec, { rounds: s.latencyRounds, durationMs: s.latencyMs, label: opts.label, profile: s.profile });
  const redis = await measureRoundTrips(run.redis!.url, paths.gateway, s.monitorCalls);
  log(`${opts.label} Redis (MONITOR, ${redis.calls} calls): ${redis.roundTripsPerCall.toFixed(2)} round trips/call (+${redis.backgroundPerCall.toFixed(2)} rate-limit sync), ${redis.commandsPerCall.toFixed(2)} commands/call ${JSON.stringify(redis.byCommand)}`);
  return { throughput, autocannon: ac, latency, redis };
}

/** The Redis Cluster column: the silent gateway against a second, silent one on a 3-master cluster. */
async function measureCluster(s: Settings, run: Running, paths: Record<Mode, Record<Which, Path>>) {
  log('Redis Cluster: 3 masters and a second gateway');
  run.cluster = await startClusterGateway(run.oauth!, run.backends);
  const out = {} as Record<Mode, Awaited<ReturnType<typeof measureClusterCpu>>>;
  for (const mode of MODES) {
    const both = { standalone: paths[mode].silent, cluster: await run.cluster.path(paths[mode].silent.path) };
    out[mode] = await measureClusterCpu(both, { standalone: run.silent!.child.pid, cluster: run.cluster.gateway.child.pid }, { rounds: s.clusterRounds, durationMs: s.throughputMs, warmupMs: s.warmupMs, connections: s.connections });
    log(`${mode.toUpperCase()} gateway CPU per call: standalone ${out[mode].standaloneCpuUsPerCall.toFixed(0)} µs, cluster ${out[mode].clusterCpuUsPerCall.toFixed(0)} µs, ratio ${out[mode].ratio.toFixed(3)}`);
  }
  await run.cluster.stop();
  run.cluster = undefined;
  return out;
}

/** Idle streams need a socket at each end: as many as the fd limit allows. */
function streamBudget(s: Settings): { count: number; note?: string } {
  const room = fdLimit().soft - 1000;
  if (s.idleStreams <= room) return { count: s.idleStreams };
  const note = `fd limit ${fdLimit().soft} allows only ${room} idle streams (asked ${s.idleStreams}); raise ulimit -n`;
  log(`WARNING ${note}`);
  return { count: Math.max(0, room), note };
}

async function startAll(s: Settings, run: Running): Promise<Record<string, number>> {
  log('starting Redis, OAuth issuer, backends, naive pass-throughs, two gateways');
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  [run.redis, run.oauth] = await Promise.all([startRedis(), startOAuthServer()]);
  run.backends.push(...(await Promise.all([startBackend(false), startBackend(true)])));
  run.naive.push(...(await Promise.all(run.backends.map((b) => startNaiveProxy(b)))));
  run.shapes = await startShapeProcesses();
  const common = { redisUrl: run.redis.url, issuer: run.oauth.issuer, backends: [...run.backends, ...run.shapes.backends] };
  run.gateway = await startGateway({ ...common, logLevel: 'default', profileDir: s.profile ? PROFILE_DIR : undefined });
  // The silent one also serves the virtual server of the virtual-server phase (bench/virtual-phase.ts).
  run.silent = await startGateway({ ...common, logLevel: 'silent', extra: { servers: VIRTUAL_SERVERS } });
  log(`switchboard (default configuration) on ${run.gateway.url} (pid ${run.gateway.child.pid}), silent on ${run.silent.url} (pid ${run.silent.child.pid})`);
  run.stats = new Redis(run.redis.url);
  const redisPid = await redisInfoField(run.stats, 'server', 'process_id');
  const [bj, bs] = run.backends;
  const [nj, ns] = run.naive;
  return { gateway: run.gateway.child.pid, silent: run.silent.child.pid, backendJson: bj!.child.pid, backendSse: bs!.child.pid, redis: redisPid, naiveJson: nj!.child.pid, naiveSse: ns!.child.pid, ...shapePids(run.shapes) };
}

async function measureAll(s: Settings, run: Running, pids: Record<string, number>): Promise<RunResults> {
  const gateway = run.gateway!;
  const token = await run.oauth!.token({ sub: 'bench-user', aud: gateway.audience });
  const headers = baseHeaders(token);
  // Each gateway is its own audience: the silent one gets a token of its own.
  const silentHeaders = baseHeaders(await run.oauth!.token({ sub: 'bench-user', aud: run.silent!.audience }));
  const paths = { json: await openPaths(run, 'json', headers, silentHeaders), sse: await openPaths(run, 'sse', headers, silentHeaders) };
  const measured = { json: await measureMode(s, 'json', paths.json, pids, run), sse: await measureMode(s, 'sse', paths.sse, pids, run) };
  const shapes = await measureShapes({ ...s.shapes, connections: s.connections, profile: s.profile }, run.shapes!, { gateway: gateway.url, silent: run.silent!.url }, { gateway: headers, silent: silentHeaders }, pids, run.pools);
  const stateless = await measureStateless(paths.json.silent, pids.silent!, { rounds: s.throughputRounds, durationMs: s.throughputMs, warmupMs: s.warmupMs, connections: s.connections });
  log(
    `2026-07-28 tools/call: ${stateless.statelessCpuUsPerCall.toFixed(0)} µs/call through the bridge, ${stateless.nativeCpuUsPerCall.toFixed(0)} to a 2026 backend, ` +
      `against ${stateless.sessionCpuUsPerCall.toFixed(0)} in a 2025 session (÷ ${stateless.ratio.toFixed(3)}, ÷ ${stateless.nativeRatio.toFixed(3)}); ` +
      `${stateless.sizedCpuUsPerCall.toFixed(0)} for a 2025 request of the 2026 size (native ÷ it ${stateless.sameSizeRatio.toFixed(3)})`,
  );
  const virtualPaths = await openVirtualPaths(run.silent!.url, silentHeaders);
  run.pools.push(...virtualPaths.map((p) => p.pool));
  const virtual = await measureVirtual(virtualPaths, pids.silent!, { rounds: s.throughputRounds, durationMs: s.throughputMs, warmupMs: s.warmupMs, connections: s.connections });
  log(`virtual server: ${virtual.virtualCpuUsPerCall.toFixed(0)} µs/call against ${virtual.mcpCpuUsPerCall.toFixed(0)} through /mcp (÷ ${virtual.cpuRatio.toFixed(3)})`);
  const cluster = await measureCluster(s, run, paths);
  await run.silent!.child.stop();

  log(`new sessions: ${s.newSessions} per path`);
  const one = { direct: createPool(`http://127.0.0.1:${run.backends[0]!.port}`, 1), gateway: createPool(gateway.url, 1) };
  run.pools.push(one.direct, one.gateway);
  const newSession = await measureNewSessions(s.newSessions, { pool: one.direct, path: '/mcp', headers }, { pool: one.gateway, path: '/mcp/fast', headers });
  const budget = streamBudget(s);
  log(`idle streams: creating ${budget.count} sessions of ${MEMORY_USERS} users`);
  const tokens = await Promise.all(Array.from({ length: MEMORY_USERS }, (_, i) => run.oauth!.token({ sub: `bench-memory-user-${i}`, aud: gateway.audience })));
  const memory = memorySampler(gateway, SETTLE_BOUNDS[s.mode]);
  const idle = await memory.sample();
  const stored = await measureStoredSessions(gateway, tokens.map(baseHeaders), run.stats!, budget.count);
  const idleStreams = await measureIdleStreams(gateway, memory, idle, tokens, stored.sessions, s.idleStreams, budget.note);
  const mode = (m: Mode): ModeResults => ({ ...measured[m], cluster: cluster[m] });
  return { json: mode('json'), sse: mode('sse'), shapes, newSession, storedSessions: stored.result, idleStreams, stateless, virtual };
}

/** After a graceful stop the gateway has written its CPU profile: summarize its loaded windows. */
function readProfile(): ProfileSummary | undefined {
  const files = readdirSync(PROFILE_DIR)
    .filter(isMainThreadProfile)
    .map((f) => join(PROFILE_DIR, f))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (files[0]) return summarizeProfile(files[0], ROOT, 15, profiledWindows);
  log('WARNING --profile: no main-thread .cpuprofile was written (did the gateway exit gracefully?)');
  return undefined;
}

function report(s: Settings, r: RunResults, facts: { calibration: Calibration; loadStart: number[]; started: number }, profile: ProfileSummary | undefined): void {
  const machine = machineInfo();
  const git = gitState(ROOT);
  const targets = targetsOf(r, s.connections);
  const header = [
    `Switchboard bench — ${s.mode} run${s.profile ? ' (PROFILED: --cpu-prof slows the default gateway; compare unprofiled runs only)' : ''}, ${machine.date}`,
    `machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.platform} ${machine.kernel}, Node ${machine.node}; commit ${git.commit}${git.srcDirty ? ` + ${git.srcDirty} uncommitted src/ changes` : ''}`,
    `calibration: one cross-process loopback round trip (write, echo, read) costs ${fmt0(facts.calibration.wallUsPerRoundTrip)} µs wall and ${fmt0(facts.calibration.cpuUsPerRoundTrip)} µs CPU on one side; a proxied call makes the gateway do 2 of them (client, backend), 3 when it also writes to Redis`,
    `paths: direct (the backend), naive (Fastify + undici pass-through), default (Switchboard as shipped: log.level info, stdout drained by the bench, rate limit and metrics on), silent (the same, log.level silent)`,
    `load: ${s.connections} connections, one request in flight each; undici ${s.throughputRounds} rounds × ${s.throughputMs / 1000} s, autocannon ${s.autocannonRounds} × ${s.autocannonMs / 1000} s, open loop ${s.latencyRounds} × ${s.latencyMs / 1000} s per path, interleaved; warm-up ${s.warmupMs / 1000} s discarded; medians`,
    `answer shapes: undici ${s.shapes.rounds} rounds, autocannon ${s.shapes.autocannonRounds}, open loop ${s.shapes.latencyRounds}, × ${s.shapes.roundMs / 1000} s per path; warm-up ${s.shapes.warmupMs / 1000} s`,
  ].join('\n');
  const errors =
    MODES.reduce((n, m) => n + r[m].throughput.errors + r[m].autocannon.errors + r[m].latency.errors + r[m].cluster.errors, 0) +
    SHAPES.reduce((n, k) => n + r.shapes[k].throughput.errors + r.shapes[k].autocannon.errors + r.shapes[k].latency.errors, 0);
  const footer = [
    cpuShares(r),
    `load average at start ${facts.loadStart.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
    `targets: ${targets.filter((t) => t.pass).length}/${targets.filter((t) => t.pass !== null).length} met; run took ${((Date.now() - facts.started) / 1000).toFixed(0)} s`,
  ].join('\n');
  process.stdout.write(`\n${header}\n\n${resultsTable(r, s.connections)}\n\n${targetsTable(targets)}\n\n${footer}\n${errors ? `WARNING: ${errors} failed calls (see JSON)\n` : ''}`);
  if (profile) process.stdout.write(`\n${formatProfile(profile)}\n`);
  const json = {
    machine: { ...machine, git, loadavgStart: facts.loadStart, loadavgEnd: loadavg(), calibration: facts.calibration },
    settings: s,
    results: r,
    targets,
    profile: profile ? { ...profile, loadWindowsUs: profiledWindows } : undefined,
    durationSecs: (Date.now() - facts.started) / 1000,
  };
  const out = join(RESULTS, 'latest.json');
  writeFileSync(out, `${JSON.stringify(json, (_k, v: unknown) => (typeof v === 'number' && !Number.isInteger(v) ? round(v, 4) : v), 2)}\n`);
  process.stdout.write(`\nwrote ${out}\n`);
}

const fmt0 = (v: number) => v.toFixed(0);

async function main(): Promise<void> {
  const s = parseArgs(process.argv.slice(2));
  const started = Date.now();
  boundRun(s.deadlineMs, `the run exceeded its ${s.deadlineMs / 1000} s budget`);
  const loadStart = loadavg();
  const machine = machineInfo();
  log(`${s.mode} run${s.profile ? ' with --profile' : ''} on ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, fd limit ${machine.fdLimit.soft}, load average ${loadStart[0]!.toFixed(2)}`);
  if (loadStart[0]! > 0.5) log(`WARNING the machine is already busy (load average ${loadStart[0]!.toFixed(2)}): figures will be noisy`);
  mkdirSync(RESULTS, { recursive: true });
  if (s.profile) {
    mkdirSync(PROFILE_DIR, { recursive: true });
    for (const f of readdirSync(PROFILE_DIR)) if (f.endsWith('.cpuprofile')) rmSync(join(PROFILE_DIR, f));
  }
  const run: Running = { backends: [], naive: [], pools: [] };
  try {
    const calibration = await calibrate();
    log(`calibration: a cross-process loopback round trip costs ${calibration.wallUsPerRoundTrip.toFixed(0)} µs wall, ${calibration.cpuUsPerRoundTrip.toFixed(0)} µs CPU on one side (${calibration.sysUsPerRoundTrip.toFixed(0)} µs system)`);
    const pids = await startAll(s, run);
    const results = await measureAll(s, run, pids);
    for (const p of run.pools.splice(0)) await p.close().catch(() => {});
    // A graceful stop is what writes the CPU profile.
    await run.gateway!.child.stop();
    report(s, results, { calibration, loadStart, started }, s.profile ? readProfile() : undefined);
    // Issue 44 part 1: four gateways of its own on the same Redis and issuer (bench/governance.ts).
    log('governance phase: plain, governed (sampling 1 and 0.1), metrics only');
    reportGovernance(await measureGovernance(s.mode === 'quick' ? QUICK_GOVERNANCE : FULL_GOVERNANCE, { redisUrl: run.redis!.url, oauth: run.oauth! }));
    // Issue 44 part 2: stdio backends against the peers, processes of its own (bench/stdio.ts).
    log('stdio phase: the SDK server direct, this gateway, mcp-proxy, supergateway');
    reportStdio(await measureStdio(s.mode === 'quick' ? QUICK_STDIO : FULL_STDIO, { oauth: run.oauth! }));
  } finally {
    for (const p of run.pools) await p.close().catch(() => {});
    run.stats?.disconnect();
    const children = [run.gateway?.child, run.silent?.child, ...run.backends.map((b) => b.child), ...run.naive.map((n) => n.child), ...(run.shapes?.backends ?? []).map((b) => b.child), ...(run.shapes?.naive ?? []).map((n) => n.child)];
    await Promise.allSettled([...children.map((c) => c?.stop()), run.cluster?.stop(), run.oauth?.stop(), run.redis?.stop()]);
    for (const g of [run.gateway, run.silent]) if (g) removeConfigFile(g);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
