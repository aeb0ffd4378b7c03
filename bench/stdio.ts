/**
 * The stdio phase (issue 44 part 2): a stdio MCP server — the official SDK, one `echo` tool
 * (bench/stdio-echo.ts) — behind Streamable HTTP, through this gateway and through the peers
 * users would pick instead, in the same rounds (bench/stdio-paths.ts):
 *
 * - the SDK server on Streamable HTTP, direct: the reference for added latency;
 * - this gateway (`transport: stdio`, the default log level as shipped, no Redis: stdio
 *   backends are single-replica), and with `--baseline DIR` the gateway of another checkout
 *   too (a `git worktree` of the commit before the direct stdio path: the loopback bridge);
 * - mcp-proxy and supergateway (default logging and `--logLevel none`), installed on demand
 *   into bench/peers/ — references, never dependencies of the product.
 *
 * Each path has one session, so one child. Closed-loop rounds of 8 calls in flight, the order
 * rotating every round; per path: calls/s and CPU per call of its whole process tree (the
 * proxy and its child) from /proc. Then unloaded latency: one call at a time, p50, minus the
 * direct path's in the same round. Medians over rounds. Every answer is checked (a 200 with a
 * result). The targets: CPU per call ≤ 0.7× the cheapest peer, calls/s ≥ 1.5× the fastest,
 * added p50 ≤ the best peer's.
 *
 *   node --import tsx bench/stdio.ts [--quick] [--rounds N] [--seconds S] [--baseline DIR] [--no-peers]
 *
 * Writes bench/results/stdio-latest.json. `npm run bench` runs this phase too (bench/run.ts).
 * Bounded: fixed rounds of fixed length; every child is stopped at the end.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { closedLoop, median, percentiles } from './load.js';
import { checkErrors, log, round, type ErrorSink } from './sampling.js';
import { ensurePeers, startDirect, startMcpProxy, startSupergateway, startSwitchboard, treeCpuUs, treePids, type StdioPath } from './stdio-paths.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const GATEWAY = 'this gateway';

export interface StdioSettings {
  rounds: number;
  roundMs: number;
  warmupMs: number;
  /** Calls in flight per path under load. */
  connections: number;
  /** Calls one at a time per path and round, for the unloaded p50. */
  latencyCalls: number;
  peers: boolean;
  /** Another checkout whose gateway runs beside this one (the loopback bridge before issue 44). */
  baseline?: string;
}

export const QUICK_STDIO: StdioSettings = { rounds: 2, roundMs: 2000, warmupMs: 1000, connections: 8, latencyCalls: 300, peers: true };
export const FULL_STDIO: StdioSettings = { rounds: 5, roundMs: 4000, warmupMs: 1500, connections: 8, latencyCalls: 1000, peers: true };

export interface PathFigures {
  callsPerSec: number;
  cpuUsPerCall: number;
  p50ms: number;
  /** p50 minus the direct path's, same round, median; absent for the direct path. */
  addedP50ms?: number;
  rounds: Array<{ callsPerSec: number; cpuUsPerCall: number; p50ms: number }>;
}

export interface StdioResults extends ErrorSink {
  settings: StdioSettings;
  machine: { cpus: number; loadavg: number[]; shared: string };
  paths: Record<string, PathFigures>;
  peersInstalled: boolean;
  targets: Array<{ figure: string; value: number; target: number; pass: boolean }>;
}

async function startPaths(s: StdioSettings, oauth: OAuthHandle, running: StdioPath[]): Promise<boolean> {
  running.push(await startDirect());
  running.push(await startSwitchboard(GATEWAY, oauth));
  if (s.baseline) running.push(await startSwitchboard(`gateway at ${s.baseline}`, oauth, s.baseline));
  const peers = s.peers && ensurePeers();
  if (peers) running.push(await startMcpProxy(), await startSupergateway(false), await startSupergateway(true));
  return peers;
}

/** One closed-loop round on one path: calls/s and CPU per call of its tree. */
async function loadRound(s: StdioSettings, p: StdioPath, sink: ErrorSink): Promise<{ callsPerSec: number; cpuUsPerCall: number }> {
  await closedLoop(p.path, s.connections, { durationMs: s.warmupMs });
  const pids = treePids(p.child.pid);
  const before = treeCpuUs(pids);
  const r = await closedLoop(p.path, s.connections, { durationMs: s.roundMs });
  const cpu = treeCpuUs(pids) - before;
  checkErrors(r, p.label, sink);
  return { callsPerSec: (r.calls * 1000) / r.elapsedMs, cpuUsPerCall: r.calls ? cpu / r.calls : NaN };
}

async function latencyRound(s: StdioSettings, p: StdioPath, sink: ErrorSink): Promise<number> {
  const r = await closedLoop(p.path, 1, { count: s.latencyCalls });
  checkErrors(r, `${p.label} (one at a time)`, sink);
  return percentiles(r.latencies, [50])[0]!;
}

export async function measureStdio(s: StdioSettings, deps: { oauth: OAuthHandle }): Promise<StdioResults> {
  const running: StdioPath[] = [];
  const sink: ErrorSink = { errors: 0 };
  try {
    const peersInstalled = await startPaths(s, deps.oauth, running);
    const perRound = new Map<string, PathFigures['rounds']>(running.map((p) => [p.label, []]));
    const added = new Map<string, number[]>(running.map((p) => [p.label, []]));
    for (let r = 0; r < s.rounds; r++) {
      const order = running.map((_, i) => running[(i + r) % running.length]!);
      const load = new Map<string, { callsPerSec: number; cpuUsPerCall: number }>();
      for (const p of order) load.set(p.label, await loadRound(s, p, sink));
      const p50 = new Map<string, number>();
      for (const p of order) p50.set(p.label, await latencyRound(s, p, sink));
      const direct = p50.get(running[0]!.label)!;
      for (const p of running) {
        perRound.get(p.label)!.push({ ...load.get(p.label)!, p50ms: p50.get(p.label)! });
        if (p.proxy) added.get(p.label)!.push(p50.get(p.label)! - direct);
      }
      log(`stdio round ${r + 1}/${s.rounds}: ${running.map((p) => `${p.label} ${Math.round(load.get(p.label)!.callsPerSec)}/s ${Math.round(load.get(p.label)!.cpuUsPerCall)} µs`).join('; ')}`);
    }
    const paths: Record<string, PathFigures> = {};
    for (const p of running) {
      const rounds = perRound.get(p.label)!;
      paths[p.label] = {
        callsPerSec: round(median(rounds.map((x) => x.callsPerSec)), 0)!,
        cpuUsPerCall: round(median(rounds.map((x) => x.cpuUsPerCall)), 0)!,
        p50ms: round(median(rounds.map((x) => x.p50ms)), 3)!,
        ...(p.proxy ? { addedP50ms: round(median(added.get(p.label)!), 3)! } : {}),
        rounds: rounds.map((x) => ({ callsPerSec: round(x.callsPerSec, 0)!, cpuUsPerCall: round(x.cpuUsPerCall, 0)!, p50ms: round(x.p50ms, 3)! })),
      };
    }
    const machine = { cpus: cpus().length, loadavg: loadavg().map((v) => round(v, 2)!), shared: 'other engineers may run tests on this machine at the same time: figures are medians of rotating rounds' };
    return { settings: s, machine, paths, peersInstalled, targets: targetsOf(paths), ...sink };
  } finally {
    await stopAll(running);
  }
}

/** Stops every path; a stdio child a peer left behind is stopped too (it was started for this run). */
async function stopAll(running: StdioPath[]): Promise<void> {
  const trees = running.map((p) => treePids(p.child.pid));
  await Promise.allSettled(running.map((p) => p.path.pool.close()));
  await Promise.allSettled(running.map((p) => p.child.stop()));
  for (const pid of trees.flat()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone, as it should be.
    }
  }
}

const isPeer = (label: string) => label.startsWith('mcp-proxy') || label.startsWith('supergateway');

/**
 * The issue's targets against the peers (none without them). Each ratio is taken within a
 * round — the gateway against the cheapest and the fastest peer of that round — and the median
 * of those is judged: on a shared machine the load moves between rounds more than between the
 * paths of one round.
 */
function targetsOf(paths: Record<string, PathFigures>): StdioResults['targets'] {
  const peers = Object.entries(paths).filter(([label]) => isPeer(label));
  const gw = paths[GATEWAY];
  if (!gw || peers.length === 0) return [];
  const rounds = gw.rounds.map((_, r) => r);
  const cpuRatio = median(rounds.map((r) => gw.rounds[r]!.cpuUsPerCall / Math.min(...peers.map(([, f]) => f.rounds[r]!.cpuUsPerCall))));
  const rateRatio = median(rounds.map((r) => gw.rounds[r]!.callsPerSec / Math.max(...peers.map(([, f]) => f.rounds[r]!.callsPerSec))));
  const bestAdded = Math.min(...peers.map(([, f]) => f.addedP50ms ?? Infinity));
  return [
    { figure: 'CPU per call ÷ the cheapest peer (within a round, median)', value: round(cpuRatio, 2)!, target: 0.7, pass: cpuRatio <= 0.7 },
    { figure: 'calls/s ÷ the fastest peer (within a round, median)', value: round(rateRatio, 2)!, target: 1.5, pass: rateRatio >= 1.5 },
    { figure: 'unloaded added p50 (ms) vs the best peer', value: gw.addedP50ms!, target: bestAdded, pass: gw.addedP50ms! <= bestAdded },
  ];
}

export function reportStdio(results: StdioResults): void {
  const lines = ['', `stdio backends (issue 44): ${results.settings.rounds} rounds, ${results.settings.connections} calls in flight, medians; ${results.machine.shared}`, '| path | calls/s | CPU per call (tree) | unloaded p50 | added p50 |', '|---|---|---|---|---|'];
  for (const [label, f] of Object.entries(results.paths)) {
    lines.push(`| ${label} | ${f.callsPerSec} | ${f.cpuUsPerCall} µs | ${f.p50ms} ms | ${f.addedP50ms === undefined ? '—' : `+${f.addedP50ms} ms`} |`);
  }
  if (!results.peersInstalled) lines.push('(the peers could not be installed: no comparison with them)');
  for (const t of results.targets) lines.push(`${t.pass ? 'PASS' : 'FAIL'} ${t.figure}: ${t.value} (target ${t.figure.startsWith('calls/s') ? '≥' : '≤'} ${t.target})`);
  lines.push(`failed calls: ${results.errors}${results.firstError ? ` (first: ${results.firstError})` : ''}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(join(ROOT, 'bench', 'results', 'stdio-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
}

function settingsFrom(argv: string[]): StdioSettings {
  const s = { ...(argv.includes('--quick') ? QUICK_STDIO : FULL_STDIO) };
  const value = (flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);
  if (value('--rounds')) s.rounds = Number(value('--rounds'));
  if (value('--seconds')) s.roundMs = Number(value('--seconds')) * 1000;
  if (value('--baseline')) s.baseline = value('--baseline');
  if (argv.includes('--no-peers')) s.peers = false;
  return s;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const oauth = await startOAuthServer();
  try {
    reportStdio(await measureStdio(settingsFrom(process.argv.slice(2)), { oauth }));
  } finally {
    await oauth.stop();
  }
}
