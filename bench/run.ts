/**
 * `npm run bench [-- --quick] [-- --profile]`: Switchboard's overhead against talking to
 * the backend directly, measured in one run on loopback (issue 7). See bench/README.md.
 *
 * Parts, each its own process except the load generator: a real Redis, a real OAuth
 * issuer, the minimal backend (bench/fast-backend.ts; one answering tools/call as JSON, one
 * as a one-event SSE stream), and Switchboard started from its CLI with a generated config.
 * The same tools/call load goes directly to a backend (its own session) and through the
 * gateway (real JWT, real session from initialize), interleaved, several rounds; figures
 * are medians over rounds.
 */
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { RATE_LIMIT_FLUSH as RATE_LIMIT_SYNC_SCRIPT } from '../src/state/redis-scripts.js';
import type { ChildHandle } from '../test/helpers/child.js';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { baseHeaders, closedLoop, createPool, median, openLoop, openSession, percentiles, type LoopResult, type Path } from './load.js';
import { calibrate } from './calibrate.js';
import { measureClusterCpu, startClusterGateway, type ClusterCpuResult, type ClusterGateway } from './cluster.js';
import { startBackend, startGateway, startNaiveProxy, type Backend, type Gateway } from './processes.js';
import { attachInspector } from './inspector.js';
import { formatProfile, isMainThreadProfile, summarizeProfile, type ProfileSummary } from './profile.js';
import { closeAll, openIdleStreams, type StreamRequest } from './streams.js';
import { commandDelta, commandStats, fdLimit, gitState, machineCpuUs, machineInfo, processCpuUs, processRssBytes, processSyscalls, redisInfoField, type MachineInfo } from './system.js';

/** The rate limiter's background sync, told apart from the message path in the round-trip count. */
const RATE_LIMIT_SYNC_SHA = createHash('sha1').update(RATE_LIMIT_SYNC_SCRIPT).digest('hex');

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const RESULTS = join(ROOT, 'bench', 'results');
const PROFILE_DIR = join(RESULTS, 'profile');

// ---------------------------------------------------------------------------------------
// Settings

interface Settings {
  mode: 'quick' | 'full';
  profile: boolean;
  connections: number;
  warmupMs: number;
  throughputRounds: number;
  throughputMs: number;
  latencyRounds: number;
  latencyMs: number;
  newSessions: number;
  idleStreams: number;
  monitorCalls: number;
  /** The whole run is aborted after this long. */
  deadlineMs: number;
}

function parseArgs(argv: string[]): Settings {
  const quick = argv.includes('--quick');
  const s: Settings = quick
    ? { mode: 'quick', profile: false, connections: 16, warmupMs: 2000, throughputRounds: 2, throughputMs: 2500, latencyRounds: 2, latencyMs: 2500, newSessions: 100, idleStreams: 1000, monitorCalls: 300, deadlineMs: 180_000 }
    : { mode: 'full', profile: false, connections: 16, warmupMs: 4000, throughputRounds: 5, throughputMs: 5000, latencyRounds: 3, latencyMs: 5000, newSessions: 200, idleStreams: 10_000, monitorCalls: 1000, deadlineMs: 480_000 };
  s.profile = argv.includes('--profile');
  const num = (flag: string): number | undefined => {
    const i = argv.indexOf(flag);
    if (i < 0) return undefined;
    const v = Number(argv[i + 1]);
    if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} needs a positive number`);
    return v;
  };
  s.idleStreams = num('--streams') ?? s.idleStreams;
  s.throughputRounds = num('--rounds') ?? s.throughputRounds;
  s.throughputMs = (num('--seconds') ?? s.throughputMs / 1000) * 1000;
  s.latencyMs = (num('--seconds') ?? s.latencyMs / 1000) * 1000;
  if (argv.includes('--help')) {
    process.stdout.write(
      'usage: npm run bench -- [--quick] [--profile] [--streams K] [--rounds N] [--seconds S]\n' +
        '  --quick     ~1 minute smoke run (fewer/shorter rounds, 1,000 idle streams)\n' +
        '  --profile   run the gateway with --cpu-prof and print its top self-time functions\n',
    );
    process.exit(0);
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// Small helpers

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const round = (v: number, digits = 2) => (Number.isFinite(v) ? Math.round(v * 10 ** digits) / 10 ** digits : null);

function cpuNow(pids: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      out[name] = processCpuUs(pid);
    } catch {
      out[name] = NaN;
    }
  }
  const own = process.cpuUsage();
  out.loadgen = own.user + own.system;
  const machine = machineCpuUs();
  out.machine = machine.busy;
  out.steal = machine.steal;
  return out;
}

/**
 * CPU used by each process between two snapshots, as a share of one core; `machine` is all
 * cores together, `other` what processes outside the bench used (other work on the host).
 */
function cpuShare(before: Record<string, number>, after: Record<string, number>, elapsedMs: number): Record<string, number> {
  const share: Record<string, number> = {};
  for (const name of Object.keys(after)) share[name] = (after[name]! - before[name]!) / (elapsedMs * 1000);
  const ours = Object.entries(share).filter(([k]) => k !== 'machine' && k !== 'steal').reduce((sum, [, v]) => sum + (Number.isFinite(v) ? v : 0), 0);
  share.other = Math.max(0, share.machine! - ours);
  return share;
}

/** When the gateway was under load (µs, CLOCK_MONOTONIC): the profile is summarized over these. */
const gatewayWindows: Array<[number, number]> = [];
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
async function underLoad<T>(which: Which, run: () => Promise<T>): Promise<T> {
  const start = nowUs();
  try {
    return await run();
  } finally {
    if (which === 'gateway') gatewayWindows.push([start, nowUs()]);
  }
}

// ---------------------------------------------------------------------------------------
// Measurements

interface PathPair {
  direct: Path;
  gateway: Path;
  /** The naive Fastify + undici pass-through, with the direct path's backend session. */
  naive: Path;
}

type Which = 'direct' | 'gateway' | 'naive';

interface ThroughputResult {
  direct: { callsPerSec: number; rounds: number[]; p50ms: number };
  gateway: { callsPerSec: number; rounds: number[]; p50ms: number };
  ratio: number;
  ratioRounds: number[];
  gatewayCpuUsPerCall: number;
  gatewayCpuRounds: number[];
  /** The naive pass-through in the same rounds: its calls/s, ratio to direct and CPU per call. */
  naive: { callsPerSec: number; ratio: number; ratioRounds: number[]; cpuUsPerCall: number };
  /** Read + write system calls per call: the gateway's, and the backend's on the direct path (for scale). */
  gatewaySyscallsPerCall: { reads: number; writes: number };
  backendSyscallsPerCallDirect: { reads: number; writes: number };
  redisCommandsPerCall: number;
  redisBreakdownPerCall: Record<string, number>;
  /** Share of one core used by each process during the gateway rounds (median). */
  cpuShareGatewayRounds: Record<string, number>;
  cpuShareDirectRounds: Record<string, number>;
  errors: number;
  firstError?: string;
}

function checkErrors(r: LoopResult, where: string, sink: { errors: number; firstError?: string }): void {
  if (r.errors > 0) {
    sink.errors += r.errors;
    sink.firstError ??= `${where}: ${r.firstError}`;
    log(`WARNING ${where}: ${r.errors} failed calls (${r.firstError})`);
  }
}

async function measureThroughput(s: Settings, pair: PathPair, pids: Record<string, number>, backendPid: number, redis: Redis, label: string): Promise<ThroughputResult> {
  log(`${label}: warm-up ${s.warmupMs} ms per path`);
  for (const which of ['direct', 'naive', 'gateway'] as const) await closedLoop(pair[which], s.connections, { durationMs: s.warmupMs });
  const rates: Record<Which, number[]> = { direct: [], gateway: [], naive: [] };
  const p50s = { direct: [] as number[], gateway: [] as number[] };
  const ratios: number[] = [];
  const naiveRatios: number[] = [];
  const cpuPerCall: number[] = [];
  const naiveCpuPerCall: number[] = [];
  const redisPerCall: number[] = [];
  const syscalls = { gateway: { reads: [] as number[], writes: [] as number[] }, direct: { reads: [] as number[], writes: [] as number[] } };
  const breakdowns: Array<Record<string, number>> = [];
  const shares = { direct: [] as Array<Record<string, number>>, gateway: [] as Array<Record<string, number>> };
  const sink: { errors: number; firstError?: string } = { errors: 0 };
  // The three paths take turns; the order rotates every round so none always goes first.
  const orders: Which[][] = [
    ['direct', 'naive', 'gateway'],
    ['gateway', 'direct', 'naive'],
    ['naive', 'gateway', 'direct'],
  ];
  for (let r = 0; r < s.throughputRounds; r++) {
    const got: Partial<Record<Which, number>> = {};
    for (const which of orders[r % orders.length]!) {
      await sleep(200);
      const statsBefore = which === 'gateway' ? await commandStats(redis) : undefined;
      const syscallPid = which === 'gateway' ? pids.gateway! : backendPid;
      const syscallsBefore = processSyscalls(syscallPid);
      const cpuBefore = cpuNow(pids);
      const res = await underLoad(which, () => closedLoop(pair[which], s.connections, { durationMs: s.throughputMs }));
      const cpuAfter = cpuNow(pids);
      const syscallsAfter = processSyscalls(syscallPid);
      checkErrors(res, `${label} ${which} round ${r + 1}`, sink);
      const rate = (res.calls * 1000) / res.elapsedMs;
      got[which] = rate;
      rates[which].push(rate);
      if (which === 'naive') {
        const naive = label === 'JSON' ? 'naiveJson' : 'naiveSse';
        naiveCpuPerCall.push((cpuAfter[naive]! - cpuBefore[naive]!) / res.calls);
        continue;
      }
      syscalls[which].reads.push((syscallsAfter.reads - syscallsBefore.reads) / res.calls);
      syscalls[which].writes.push((syscallsAfter.writes - syscallsBefore.writes) / res.calls);
      p50s[which].push(percentiles(res.latencies, [50])[0]!);
      shares[which].push(cpuShare(cpuBefore, cpuAfter, res.elapsedMs));
      if (which === 'gateway' && statsBefore) {
        const delta = commandDelta(statsBefore, await commandStats(redis));
        cpuPerCall.push((cpuAfter.gateway! - cpuBefore.gateway!) / res.calls);
        redisPerCall.push(delta.total / res.calls);
        breakdowns.push(Object.fromEntries(Object.entries(delta.byCommand).map(([k, v]) => [k, v / res.calls])));
      }
    }
    ratios.push(got.gateway! / got.direct!);
    naiveRatios.push(got.naive! / got.direct!);
    log(
      `${label} round ${r + 1}/${s.throughputRounds}: direct ${got.direct!.toFixed(0)}/s, naive ${got.naive!.toFixed(0)}/s (${naiveCpuPerCall.at(-1)!.toFixed(0)} µs/call), ` +
        `gateway ${got.gateway!.toFixed(0)}/s (${cpuPerCall.at(-1)!.toFixed(0)} µs/call), ratio ${(got.gateway! / got.direct!).toFixed(3)} (naive ${(got.naive! / got.direct!).toFixed(3)}), ` +
        `syscalls/call gateway ${(syscalls.gateway.reads.at(-1)! + syscalls.gateway.writes.at(-1)!).toFixed(2)}`,
    );
  }
  const medianRecord = (list: Array<Record<string, number>>) => {
    const keys = new Set(list.flatMap((x) => Object.keys(x)));
    return Object.fromEntries([...keys].map((k) => [k, round(median(list.map((x) => x[k] ?? 0)), 3)!]));
  };
  return {
    direct: { callsPerSec: median(rates.direct), rounds: rates.direct.map((x) => round(x, 0)!), p50ms: median(p50s.direct) },
    gateway: { callsPerSec: median(rates.gateway), rounds: rates.gateway.map((x) => round(x, 0)!), p50ms: median(p50s.gateway) },
    ratio: median(ratios),
    ratioRounds: ratios.map((x) => round(x, 3)!),
    gatewayCpuUsPerCall: median(cpuPerCall),
    gatewayCpuRounds: cpuPerCall.map((x) => round(x, 1)!),
    naive: { callsPerSec: median(rates.naive), ratio: median(naiveRatios), ratioRounds: naiveRatios.map((x) => round(x, 3)!), cpuUsPerCall: median(naiveCpuPerCall) },
    gatewaySyscallsPerCall: { reads: median(syscalls.gateway.reads), writes: median(syscalls.gateway.writes) },
    backendSyscallsPerCallDirect: { reads: median(syscalls.direct.reads), writes: median(syscalls.direct.writes) },
    redisCommandsPerCall: median(redisPerCall),
    redisBreakdownPerCall: medianRecord(breakdowns),
    cpuShareGatewayRounds: medianRecord(shares.gateway),
    cpuShareDirectRounds: medianRecord(shares.direct),
    ...sink,
  };
}

interface LatencyResult {
  rate: number;
  direct: { p50: number; p90: number; p99: number; achievedRate: number };
  gateway: { p50: number; p90: number; p99: number; achievedRate: number };
  addedP50: number;
  addedP99: number;
  gatewayCpuUsPerCall: number;
  errors: number;
  firstError?: string;
}

async function measureLatency(s: Settings, pair: PathPair, rate: number, pids: Record<string, number>, label: string): Promise<LatencyResult> {
  const pct = { direct: [] as number[][], gateway: [] as number[][] };
  const achieved = { direct: [] as number[], gateway: [] as number[] };
  const added50: number[] = [];
  const added99: number[] = [];
  const cpuPerCall: number[] = [];
  const sink: { errors: number; firstError?: string } = { errors: 0 };
  for (let r = 0; r < s.latencyRounds; r++) {
    const order: Array<'direct' | 'gateway'> = r % 2 === 0 ? ['direct', 'gateway'] : ['gateway', 'direct'];
    const got: Partial<Record<'direct' | 'gateway', number[]>> = {};
    for (const which of order) {
      await sleep(200);
      const cpuBefore = cpuNow(pids);
      const res = await underLoad(which, () => openLoop(pair[which], rate, s.latencyMs));
      const cpuAfter = cpuNow(pids);
      checkErrors(res, `${label} latency ${which} round ${r + 1}`, sink);
      const p = percentiles(res.latencies, [50, 90, 99]);
      got[which] = p;
      pct[which].push(p);
      achieved[which].push((res.calls * 1000) / res.elapsedMs);
      if (which === 'gateway') cpuPerCall.push((cpuAfter.gateway! - cpuBefore.gateway!) / res.calls);
    }
    added50.push(got.gateway![0]! - got.direct![0]!);
    added99.push(got.gateway![2]! - got.direct![2]!);
    log(`${label} latency round ${r + 1}/${s.latencyRounds} @ ${rate}/s: p50 direct ${got.direct![0]!.toFixed(3)} ms, gateway ${got.gateway![0]!.toFixed(3)} ms; p99 direct ${got.direct![2]!.toFixed(3)} ms, gateway ${got.gateway![2]!.toFixed(3)} ms`);
  }
  const summarize = (which: 'direct' | 'gateway') => ({
    p50: median(pct[which].map((p) => p[0]!)),
    p90: median(pct[which].map((p) => p[1]!)),
    p99: median(pct[which].map((p) => p[2]!)),
    achievedRate: median(achieved[which]),
  });
  return { rate, direct: summarize('direct'), gateway: summarize('gateway'), addedP50: median(added50), addedP99: median(added99), gatewayCpuUsPerCall: median(cpuPerCall), ...sink };
}

/** Redis round trips per call: MONITOR tells commands sent by clients from those run inside Lua. */
async function measureRoundTrips(redisUrl: string, path: Path, calls: number): Promise<{ calls: number; roundTripsPerCall: number; backgroundPerCall: number; commandsPerCall: number; fromLuaPerCall: number; byCommand: Record<string, number> }> {
  const monitorClient = new Redis(redisUrl, { lazyConnect: true });
  await monitorClient.connect();
  const monitor = await monitorClient.monitor();
  let top = 0;
  let lua = 0;
  let background = 0;
  let inBackgroundScript = false;
  const byCommand: Record<string, number> = {};
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const cmd = (args[0] ?? '').toLowerCase();
    if (cmd === 'info') return;
    // The rate limiter's sync runs on a timer for all users at once, not per message: it is
    // counted apart (and so are the commands it runs inside Lua).
    if (source !== 'lua') inBackgroundScript = (cmd === 'evalsha' && args[1] === RATE_LIMIT_SYNC_SHA) || (cmd === 'eval' && args[1] === RATE_LIMIT_SYNC_SCRIPT);
    if (inBackgroundScript) {
      if (source !== 'lua') background++;
      const key = source === 'lua' ? `rate-limit sync: ${cmd} (in Lua)` : 'rate-limit sync';
      byCommand[key] = (byCommand[key] ?? 0) + 1;
      return;
    }
    if (source === 'lua') lua++;
    else top++;
    const key = source === 'lua' ? `${cmd} (in Lua)` : cmd;
    byCommand[key] = (byCommand[key] ?? 0) + 1;
  });
  await sleep(100);
  const res = await closedLoop(path, 4, { count: calls });
  await sleep(300);
  monitor.disconnect();
  monitorClient.disconnect();
  const n = res.calls || 1;
  return {
    calls: res.calls,
    roundTripsPerCall: top / n,
    backgroundPerCall: background / n,
    commandsPerCall: (top + lua) / n,
    fromLuaPerCall: lua / n,
    byCommand: Object.fromEntries(Object.entries(byCommand).map(([k, v]) => [k, round(v / n, 3)!])),
  };
}

async function measureNewSessions(n: number, direct: { pool: ReturnType<typeof createPool>; path: string; headers: Record<string, string> }, gateway: typeof direct) {
  const times = { direct: [] as number[], gateway: [] as number[] };
  for (let i = 0; i < n; i++) {
    const order: Array<'direct' | 'gateway'> = i % 2 === 0 ? ['direct', 'gateway'] : ['gateway', 'direct'];
    for (const which of order) {
      const p = which === 'direct' ? direct : gateway;
      const t0 = performance.now();
      await openSession(p.pool, p.path, p.headers);
      times[which].push(performance.now() - t0);
    }
  }
  const d = percentiles(Float64Array.from(times.direct), [50, 99]);
  const g = percentiles(Float64Array.from(times.gateway), [50, 99]);
  return { sessions: n, direct: { p50: d[0]!, p99: d[1]! }, gateway: { p50: g[0]!, p99: g[1]! }, addedP50: g[0]! - d[0]! };
}

// ---------------------------------------------------------------------------------------
// Report

interface Target {
  name: string;
  target: string;
  value: string;
  pass: boolean | null;
}

const fmt = (v: number | null | undefined, digits = 0) =>
  v === null || v === undefined || !Number.isFinite(v) ? '—' : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mark = (pass: boolean | null) => (pass === null ? '' : pass ? 'PASS' : 'FAIL');

function table(rows: string[][], header: string[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const s = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const watchdog = setTimeout(() => {
    log(`ABORT: the run exceeded its ${s.deadlineMs / 1000} s budget`);
    process.exit(1);
  }, s.deadlineMs);
  watchdog.unref();
  process.on('SIGINT', () => process.exit(130));

  const machine: MachineInfo = machineInfo();
  const git = gitState(ROOT);
  const loadStart = loadavg();
  log(`${s.mode} run${s.profile ? ' with --profile' : ''} on ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, fd limit ${machine.fdLimit.soft}, load average ${loadStart[0]!.toFixed(2)}`);
  if (loadStart[0]! > 0.5) log(`WARNING the machine is already busy (load average ${loadStart[0]!.toFixed(2)}): figures will be noisy`);
  mkdirSync(RESULTS, { recursive: true });
  if (s.profile) {
    mkdirSync(PROFILE_DIR, { recursive: true });
    for (const f of readdirSync(PROFILE_DIR)) if (f.endsWith('.cpuprofile')) rmSync(join(PROFILE_DIR, f));
  }

  // Idle streams need a socket at each end: one in this process, one in the gateway.
  const fdRoom = Math.min(fdLimit().soft, Infinity) - 1000;
  let streamTarget = s.idleStreams;
  let streamNote: string | undefined;
  if (streamTarget > fdRoom) {
    streamNote = `fd limit ${fdLimit().soft} allows only ${fdRoom} idle streams (asked ${s.idleStreams}); raise ulimit -n`;
    log(`WARNING ${streamNote}`);
    streamTarget = Math.max(0, fdRoom);
  }

  let redisHandle: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  const backends: Backend[] = [];
  const naiveProxies: Array<{ child: ChildHandle; port: number }> = [];
  let gateway: Gateway | undefined;
  let clusterGateway: ClusterGateway | undefined;
  const pools: Array<ReturnType<typeof createPool>> = [];
  let stats: Redis | undefined;
  let profileSummary: ProfileSummary | undefined;
  try {
    const calibration = await calibrate();
    log(`calibration: a cross-process loopback round trip costs ${calibration.wallUsPerRoundTrip.toFixed(0)} µs wall, ${calibration.cpuUsPerRoundTrip.toFixed(0)} µs CPU on one side (${calibration.sysUsPerRoundTrip.toFixed(0)} µs system)`);
    log('starting Redis, OAuth issuer, backends');
    process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
    [redisHandle, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
    backends.push(...(await Promise.all([startBackend(false), startBackend(true)])));
    gateway = await startGateway({ redisUrl: redisHandle.url, issuer: oauth.issuer, backends, profileDir: s.profile ? PROFILE_DIR : undefined });
    log(`switchboard ready on ${gateway.url} (pid ${gateway.child.pid})`);

    stats = new Redis(redisHandle.url);
    const redisPid = await redisInfoField(stats, 'server', 'process_id');
    naiveProxies.push(...(await Promise.all(backends.map((b) => startNaiveProxy(b)))));
    const pids = { gateway: gateway.child.pid, backendJson: backends[0]!.child.pid, backendSse: backends[1]!.child.pid, redis: redisPid, naiveJson: naiveProxies[0]!.child.pid, naiveSse: naiveProxies[1]!.child.pid };

    const token = await oauth.token({ sub: 'bench-user', aud: gateway.audience });
    const headers = baseHeaders(token);

    const pairs: Record<'json' | 'sse', PathPair> = {} as Record<'json' | 'sse', PathPair>;
    for (const [mode, backend, naiveProxy] of [['json', backends[0]!, naiveProxies[0]!], ['sse', backends[1]!, naiveProxies[1]!]] as const) {
      const directPool = createPool(`http://127.0.0.1:${backend.port}`, 64);
      const gatewayPool = createPool(gateway.url, 64);
      const naivePool = createPool(`http://127.0.0.1:${naiveProxy.port}`, 64);
      pools.push(directPool, gatewayPool, naivePool);
      const gwPath = `/mcp/${backend.sse ? 'fast-sse' : 'fast'}`;
      const directSession = await openSession(directPool, '/mcp', headers);
      const gatewaySession = await openSession(gatewayPool, gwPath, headers);
      pairs[mode] = {
        direct: { label: `direct ${mode}`, pool: directPool, origin: `http://127.0.0.1:${backend.port}`, path: '/mcp', headers: { ...headers, 'mcp-session-id': directSession } },
        gateway: { label: `gateway ${mode}`, pool: gatewayPool, origin: gateway.url, path: gwPath, headers: { ...headers, 'mcp-session-id': gatewaySession } },
        naive: { label: `naive ${mode}`, pool: naivePool, origin: `http://127.0.0.1:${naiveProxy.port}`, path: gwPath, headers: { ...headers, 'mcp-session-id': directSession } },
      };
    }

    // Throughput at 16 connections, then latency at half the gateway's maximum.
    const throughput = {} as Record<'json' | 'sse', ThroughputResult>;
    const latency = {} as Record<'json' | 'sse', LatencyResult>;
    const roundTrips = {} as Record<'json' | 'sse', Awaited<ReturnType<typeof measureRoundTrips>>>;
    for (const mode of ['json', 'sse'] as const) {
      throughput[mode] = await measureThroughput(s, pairs[mode], pids, mode === 'json' ? pids.backendJson! : pids.backendSse!, stats, mode.toUpperCase());
    }
    for (const mode of ['json', 'sse'] as const) {
      const rate = Math.max(50, Math.round(throughput[mode].gateway.callsPerSec / 2 / 50) * 50);
      latency[mode] = await measureLatency(s, pairs[mode], rate, pids, mode.toUpperCase());
    }
    for (const mode of ['json', 'sse'] as const) {
      roundTrips[mode] = await measureRoundTrips(redisHandle.url, pairs[mode].gateway, s.monitorCalls);
      log(`${mode.toUpperCase()} Redis (MONITOR, ${roundTrips[mode].calls} calls): ${roundTrips[mode].roundTripsPerCall.toFixed(2)} round trips/call on the message path (+${roundTrips[mode].backgroundPerCall.toFixed(2)} rate-limit sync), ${roundTrips[mode].commandsPerCall.toFixed(2)} commands/call ${JSON.stringify(roundTrips[mode].byCommand)}`);
    }

    // The Redis Cluster column: a second gateway on a 3-master cluster (bench/cluster.ts).
    log('Redis Cluster: 3 masters and a second gateway');
    clusterGateway = await startClusterGateway(oauth, backends);
    const clusterCpu = {} as Record<'json' | 'sse', ClusterCpuResult>;
    for (const mode of ['json', 'sse'] as const) {
      const paths = { standalone: pairs[mode].gateway, cluster: await clusterGateway.path(pairs[mode].gateway.path) };
      const clusterPids = { standalone: gateway.child.pid, cluster: clusterGateway.gateway.child.pid };
      clusterCpu[mode] = await measureClusterCpu(paths, clusterPids, { rounds: s.throughputRounds, durationMs: s.throughputMs, warmupMs: s.warmupMs, connections: s.connections });
      const c = clusterCpu[mode];
      log(`${mode.toUpperCase()} gateway CPU per call: standalone ${c.standaloneCpuUsPerCall.toFixed(0)} µs, cluster ${c.clusterCpuUsPerCall.toFixed(0)} µs, ratio ${c.ratio.toFixed(3)} ${JSON.stringify(c.ratioRounds)}`);
    }
    await clusterGateway.stop();
    clusterGateway = undefined;

    // New-session cost, one at a time on one connection per path.
    log(`new sessions: ${s.newSessions} per path`);
    const sessionDirectPool = createPool(`http://127.0.0.1:${backends[0]!.port}`, 1);
    const sessionGatewayPool = createPool(gateway.url, 1);
    pools.push(sessionDirectPool, sessionGatewayPool);
    const newSession = await measureNewSessions(
      s.newSessions,
      { pool: sessionDirectPool, path: '/mcp', headers },
      { pool: sessionGatewayPool, path: '/mcp/fast', headers },
    );

    // Stored sessions and idle streams.
    log(`idle streams: creating ${streamTarget} sessions`);
    const bulkPool = createPool(gateway.url, 32);
    pools.push(bulkPool);
    await sleep(500);
    const memBefore = await redisInfoField(stats, 'memory', 'used_memory');
    const sessionIds: string[] = [];
    let nextSession = 0;
    const tSessions = performance.now();
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (nextSession < streamTarget) {
          nextSession++;
          sessionIds.push(await openSession(bulkPool, '/mcp/fast', headers));
        }
      }),
    );
    const sessionsSecs = (performance.now() - tSessions) / 1000;
    await sleep(500);
    const memAfter = await redisInfoField(stats, 'memory', 'used_memory');
    const storedSessions = {
      sessions: sessionIds.length,
      usedMemoryDeltaBytes: memAfter - memBefore,
      bytesPerSession: (memAfter - memBefore) / Math.max(1, sessionIds.length),
      sessionsPerSec: sessionIds.length / sessionsSecs,
    };
    log(`stored sessions: ${sessionIds.length} in ${sessionsSecs.toFixed(1)} s; Redis used_memory +${(storedSessions.usedMemoryDeltaBytes / 1024).toFixed(0)} KiB = ${storedSessions.bytesPerSession.toFixed(0)} B/session`);

    // Memory is sampled after a forced GC (through the inspector), so that the garbage left
    // by creating the sessions does not hide what the streams hold.
    let inspector: Awaited<ReturnType<typeof attachInspector>> | undefined;
    let gcNote: string | undefined;
    try {
      inspector = await attachInspector(gateway.child.pid, gateway.inspectPort);
    } catch (err) {
      gcNote = `no forced GC (${(err as Error).message}); RSS deltas include garbage`;
      log(`WARNING ${gcNote}`);
    }
    const sampleMemory = async () => {
      if (inspector) {
        await inspector.collectGarbage();
        await inspector.collectGarbage();
        await sleep(300);
      }
      const heap = inspector ? await inspector.memoryUsage() : undefined;
      return { rss: processRssBytes(gateway!.child.pid), heapUsed: heap?.heapUsed ?? NaN, external: heap?.external ?? NaN };
    };
    await sleep(500);
    const before = await sampleMemory();
    const streamHeaders = { Accept: 'text/event-stream', Authorization: `Bearer ${token}`, 'MCP-Protocol-Version': '2025-11-25' };
    const requests: StreamRequest[] = sessionIds.map((id) => ({ host: '127.0.0.1', port: gateway!.port, path: '/mcp/fast', headers: { ...streamHeaders, 'Mcp-Session-Id': id } }));
    log(`idle streams: opening ${requests.length}`);
    const tStreams = performance.now();
    const opened = await openIdleStreams(requests, 64);
    const streamsSecs = (performance.now() - tStreams) / 1000;
    if (opened.failures) log(`WARNING ${opened.failures} streams failed to open (${opened.firstError})`);
    await sleep(2000);
    const after = await sampleMemory();
    inspector?.close();
    const n = Math.max(1, opened.sockets.length);
    const perStream = (after.rss - before.rss) / n;
    const idleStreams = {
      requested: s.idleStreams,
      opened: opened.sockets.length,
      failures: opened.failures,
      firstError: opened.firstError,
      note: [streamNote, gcNote].filter(Boolean).join('; ') || undefined,
      openSecs: streamsSecs,
      rssBeforeBytes: before.rss,
      rssAfterBytes: after.rss,
      bytesPerStream: perStream,
      heapUsedBeforeBytes: before.heapUsed,
      heapUsedAfterBytes: after.heapUsed,
      heapBytesPerStream: (after.heapUsed - before.heapUsed) / n,
      externalBytesPerStream: (after.external - before.external) / n,
      /** Gateway RSS with 10,000 streams: measured when 10,000 were opened, else baseline + 10,000 × per-stream. */
      rssAt10kBytes: opened.sockets.length >= 10_000 ? after.rss : before.rss + 10_000 * perStream,
      projected: opened.sockets.length < 10_000,
    };
    log(`idle streams: ${opened.sockets.length} open in ${streamsSecs.toFixed(1)} s; gateway RSS ${(before.rss / 1e6).toFixed(0)} → ${(after.rss / 1e6).toFixed(0)} MB = ${(perStream / 1024).toFixed(1)} KiB/stream (JS heap ${(idleStreams.heapBytesPerStream / 1024).toFixed(1)} KiB/stream)`);
    closeAll(opened.sockets);
    await sleep(500);

    // Shut down (a graceful stop writes the CPU profile).
    for (const p of pools) await p.close().catch(() => {});
    pools.length = 0;
    await gateway.child.stop();
    if (s.profile) {
      const files = readdirSync(PROFILE_DIR)
        .filter(isMainThreadProfile)
        .map((f) => join(PROFILE_DIR, f))
        .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
      if (files[0]) profileSummary = summarizeProfile(files[0], ROOT, 15, gatewayWindows);
      else log('WARNING --profile: no main-thread .cpuprofile was written (did the gateway exit gracefully?)');
    }

    // -------------------------------------------------------------------------------------
    const targets: Target[] = [];
    for (const mode of ['json', 'sse'] as const) {
      const t = throughput[mode];
      const l = latency[mode];
      const M = mode.toUpperCase();
      targets.push(
        { name: `throughput ratio @${s.connections} conn (${M})`, target: '≥ 0.40', value: fmt(t.ratio, 3), pass: t.ratio >= 0.4 },
        { name: `gateway CPU per call, saturated (${M})`, target: '≤ 100 µs', value: `${fmt(t.gatewayCpuUsPerCall)} µs`, pass: t.gatewayCpuUsPerCall <= 100 },
        { name: `gateway CPU per call, half load (${M})`, target: '≤ 100 µs', value: `${fmt(l.gatewayCpuUsPerCall)} µs`, pass: l.gatewayCpuUsPerCall <= 100 },
        { name: `added p50 at half load (${M})`, target: '≤ 0.5 ms', value: `${fmt(l.addedP50, 3)} ms`, pass: l.addedP50 <= 0.5 },
        { name: `Redis round trips per call, message path (${M})`, target: '≤ 1', value: fmt(roundTrips[mode].roundTripsPerCall, 2), pass: roundTrips[mode].roundTripsPerCall <= 1.001 },
        { name: `gateway CPU per call, Redis Cluster ÷ standalone (${M})`, target: '≤ 1.10', value: fmt(clusterCpu[mode].ratio, 3), pass: clusterCpu[mode].ratio <= 1.1 },
      );
    }
    const memoryTarget: Target = {
      name: `gateway RSS with 10,000 idle SSE streams${idleStreams.projected ? ` (projected from ${idleStreams.opened})` : ''}`,
      target: '≤ 500 MB',
      value: `${fmt(idleStreams.rssAt10kBytes / 1e6)} MB`,
      pass: idleStreams.opened > 0 ? idleStreams.rssAt10kBytes <= 500e6 : null,
    };
    targets.push(memoryTarget);

    const rows: string[][] = [];
    for (const mode of ['json', 'sse'] as const) {
      const t = throughput[mode];
      const l = latency[mode];
      const M = mode.toUpperCase();
      rows.push(
        [`tools/call, ${M} answers`, '', '', '', '', ''],
        [`  throughput @${s.connections} conn (calls/s)`, fmt(t.direct.callsPerSec), fmt(t.gateway.callsPerSec), `ratio ${fmt(t.ratio, 3)}`, '≥ 0.40', mark(t.ratio >= 0.4)],
        [`  naive Fastify + undici pass-through (calls/s)`, '', fmt(t.naive.callsPerSec), `ratio ${fmt(t.naive.ratio, 3)}`, '', ''],
        [`  naive pass-through CPU per call (µs)`, '', fmt(t.naive.cpuUsPerCall), `gateway ÷ naive ${fmt(t.gatewayCpuUsPerCall / t.naive.cpuUsPerCall, 2)}`, '', ''],
        [`  closed-loop p50 @${s.connections} conn (ms)`, fmt(t.direct.p50ms, 3), fmt(t.gateway.p50ms, 3), `+${fmt(t.gateway.p50ms - t.direct.p50ms, 3)}`, '', ''],
        [`  open-loop p50 @ ${fmt(l.rate)} calls/s (ms)`, fmt(l.direct.p50, 3), fmt(l.gateway.p50, 3), `+${fmt(l.addedP50, 3)}`, '≤ +0.5', mark(l.addedP50 <= 0.5)],
        [`  open-loop p99 @ ${fmt(l.rate)} calls/s (ms)`, fmt(l.direct.p99, 3), fmt(l.gateway.p99, 3), `+${fmt(l.addedP99, 3)}`, '', ''],
        [`  gateway CPU per call, saturated (µs)`, '', fmt(t.gatewayCpuUsPerCall), '', '≤ 100', mark(t.gatewayCpuUsPerCall <= 100)],
        [`  gateway CPU per call, half load (µs)`, '', fmt(l.gatewayCpuUsPerCall), '', '≤ 100', mark(l.gatewayCpuUsPerCall <= 100)],
        [`  system calls per call, read + write (backend | gateway)`, fmt(t.backendSyscallsPerCallDirect.reads + t.backendSyscallsPerCallDirect.writes, 2), fmt(t.gatewaySyscallsPerCall.reads + t.gatewaySyscallsPerCall.writes, 2), `${fmt(t.gatewaySyscallsPerCall.reads, 2)} r + ${fmt(t.gatewaySyscallsPerCall.writes, 2)} w`, '', ''],
        [`  Redis commands per call (commandstats)`, '0', fmt(t.redisCommandsPerCall, 2), '', '', ''],
        [`  Redis round trips per call (MONITOR)`, '0', fmt(roundTrips[mode].roundTripsPerCall, 2), `+${fmt(roundTrips[mode].fromLuaPerCall, 2)} in Lua`, '≤ 1', mark(roundTrips[mode].roundTripsPerCall <= 1.001)],
        [`  + rate-limit sync (background, all users)`, '0', fmt(roundTrips[mode].backgroundPerCall, 2), 'every 100 ms', '', ''],
        [`  gateway CPU per call, Redis Cluster (µs)`, '', fmt(clusterCpu[mode].clusterCpuUsPerCall), `standalone ${fmt(clusterCpu[mode].standaloneCpuUsPerCall)}, ratio ${fmt(clusterCpu[mode].ratio, 3)}`, '≤ 1.10 ×', mark(clusterCpu[mode].ratio <= 1.1)],
      );
    }
    rows.push(
      ['sessions', '', '', '', '', ''],
      [`  new session p50 (initialize + initialized, ms)`, fmt(newSession.direct.p50, 3), fmt(newSession.gateway.p50, 3), `+${fmt(newSession.addedP50, 3)}`, '', ''],
      [`  new session p99 (ms)`, fmt(newSession.direct.p99, 3), fmt(newSession.gateway.p99, 3), '', '', ''],
      [`  Redis memory per stored session (bytes)`, '', fmt(storedSessions.bytesPerSession), `${fmt(storedSessions.sessions)} sessions`, '', ''],
      [`idle SSE streams (${fmt(idleStreams.opened)} open)`, '', '', '', '', ''],
      [`  gateway RSS per idle stream (KiB)`, '', fmt(idleStreams.bytesPerStream / 1024, 1), `JS heap ${fmt(idleStreams.heapBytesPerStream / 1024, 1)}`, '', ''],
      [`  gateway RSS before → with streams (MB)`, '', `${fmt(before.rss / 1e6)} → ${fmt(after.rss / 1e6)}`, '', '', ''],
      [`  gateway RSS with 10,000 streams (MB)`, '', fmt(idleStreams.rssAt10kBytes / 1e6), idleStreams.projected ? 'projected' : 'measured', '≤ 500', mark(memoryTarget.pass)],
    );

    const share = (x: Record<string, number>) =>
      `gateway ${fmt((x.gateway ?? 0) * 100)}%, backend ${fmt(((x.backendJson ?? 0) + (x.backendSse ?? 0)) * 100)}%, redis ${fmt((x.redis ?? 0) * 100)}%, load generator ${fmt((x.loadgen ?? 0) * 100)}%, other processes ${fmt((x.other ?? 0) * 100)}%, steal ${fmt((x.steal ?? 0) * 100)}%`;
    const breakdown = (mode: 'json' | 'sse') => Object.entries(roundTrips[mode].byCommand).map(([k, v]) => `${k} ${fmt(v, 2)}`).join(', ');

    const header = [
      `Switchboard bench — ${s.mode} run${s.profile ? ' (PROFILED: --cpu-prof slows the gateway; compare unprofiled runs only)' : ''}, ${machine.date}`,
      `machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.platform} ${machine.kernel}, Node ${machine.node}; commit ${git.commit}${git.srcDirty ? ` + ${git.srcDirty} uncommitted src/ changes` : ''}`,
      `calibration: one cross-process loopback round trip (write, echo, read) costs ${fmt(calibration.wallUsPerRoundTrip)} µs wall and ${fmt(calibration.cpuUsPerRoundTrip)} µs CPU on one side; a proxied call makes the gateway do 2 of them (client, backend), 3 when it also writes to Redis`,
      `load: undici in the bench process, ${s.connections} connections, pipelining 1; ${s.throughputRounds} throughput rounds × ${s.throughputMs / 1000} s and ${s.latencyRounds} latency rounds × ${s.latencyMs / 1000} s per path, interleaved; warm-up ${s.warmupMs / 1000} s discarded; medians`,
    ].join('\n');
    const body = table(rows, ['', 'direct', 'gateway', 'difference', 'target', '']);
    const footer = [
      `Redis per gateway call (MONITOR): JSON ${breakdown('json')}; SSE ${breakdown('sse')}`,
      `CPU, share of one core (2 cores = 200%), median of rounds:`,
      `  JSON gateway rounds: ${share(throughput.json.cpuShareGatewayRounds)}`,
      `  JSON direct rounds:  ${share(throughput.json.cpuShareDirectRounds)}`,
      `  SSE gateway rounds:  ${share(throughput.sse.cpuShareGatewayRounds)}`,
      `load average at start ${loadStart.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
      `targets: ${targets.filter((t) => t.pass).length}/${targets.filter((t) => t.pass !== null).length} met; run took ${((Date.now() - started) / 1000).toFixed(0)} s`,
    ].join('\n');
    const errors = throughput.json.errors + throughput.sse.errors + latency.json.errors + latency.sse.errors + clusterCpu.json.errors + clusterCpu.sse.errors;
    process.stdout.write(`\n${header}\n\n${body}\n\n${footer}\n${errors ? `WARNING: ${errors} failed calls (see JSON)\n` : ''}`);
    if (profileSummary) process.stdout.write(`\n${formatProfile(profileSummary)}\n`);

    const json = {
      machine: { ...machine, git, loadavgStart: loadStart, loadavgEnd: loadavg(), calibration },
      settings: s,
      results: {
        json: { throughput: throughput.json, latency: latency.json, redis: roundTrips.json, cluster: clusterCpu.json },
        sse: { throughput: throughput.sse, latency: latency.sse, redis: roundTrips.sse, cluster: clusterCpu.sse },
        newSession,
        storedSessions,
        idleStreams,
      },
      targets,
      profile: profileSummary ? { ...profileSummary, loadWindowsUs: gatewayWindows } : undefined,
      durationSecs: (Date.now() - started) / 1000,
    };
    const out = join(RESULTS, 'latest.json');
    writeFileSync(out, `${JSON.stringify(json, (_k, v: unknown) => (typeof v === 'number' && !Number.isInteger(v) ? round(v, 4) : v), 2)}\n`);
    process.stdout.write(`\nwrote ${out}\n`);
  } finally {
    for (const p of pools) await p.close().catch(() => {});
    stats?.disconnect();
    await Promise.allSettled([gateway?.child.stop(), clusterGateway?.stop(), ...backends.map((b) => b.child.stop()), ...naiveProxies.map((p) => p.child.stop()), oauth?.stop(), redisHandle?.stop()]);
    if (gateway) rmSync(gateway.configFile, { force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
