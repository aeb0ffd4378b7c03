/**
 * Added latency at half load: open-loop rounds (bench/load.ts `openLoop`) at one fixed rate
 * — half the default gateway's maximum, lowered when it falls behind (`halfLoadLatency`) — on the direct path, the
 * naive pass-through and both gateways, the order rotating every round. Per round each
 * proxy's p50 and p99 minus the direct path's; median over rounds. The naive pass-through's
 * figure is the floor a proxy hop costs on this machine at that rate: what any target for the
 * gateway's added latency has to be read against. Only the undici generator: autocannon has no open
 * loop worth the name (bench/autocannon.ts).
 */
import { median, openLoop, percentiles, type Path } from './load.js';
import { checkErrors, cpuNow, log, sleep, underLoad, type ErrorSink } from './sampling.js';

type LatencyPath = 'direct' | 'naive' | 'gateway' | 'silent';
const ORDER: readonly LatencyPath[] = ['direct', 'naive', 'gateway', 'silent'];
const PROXIES = ['naive', 'gateway', 'silent'] as const;

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  achievedRate: number;
}

export interface LatencyResult extends ErrorSink {
  rate: number;
  direct: Percentiles;
  /** The naive pass-through (bench/naive-proxy.ts) at the same rate. */
  naive: Percentiles;
  /** The default configuration. */
  gateway: Percentiles;
  silent: Percentiles;
  naiveAddedP50: number;
  naiveAddedP99: number;
  addedP50: number;
  addedP99: number;
  silentAddedP50: number;
  silentAddedP99: number;
  /** CPU per call at this rate: default and silent gateway. */
  gatewayCpuUsPerCall: number;
  silentCpuUsPerCall: number;
}

export async function measureLatency(
  paths: Record<LatencyPath, Path>,
  pids: { gateway: number; silent: number } & Record<string, number>,
  opts: { rate: number; rounds: number; durationMs: number; label: string; profile: boolean },
): Promise<LatencyResult> {
  const pct = { direct: [] as number[][], naive: [] as number[][], gateway: [] as number[][], silent: [] as number[][] };
  const achieved = { direct: [] as number[], naive: [] as number[], gateway: [] as number[], silent: [] as number[] };
  const added = { naive: [] as number[][], gateway: [] as number[][], silent: [] as number[][] };
  const cpu = { gateway: [] as number[], silent: [] as number[] };
  const sink: ErrorSink = { errors: 0 };
  for (let r = 0; r < opts.rounds; r++) {
    const got: Partial<Record<LatencyPath, number[]>> = {};
    for (const which of ORDER.map((_, i) => ORDER[(i + r) % ORDER.length]!)) {
      await sleep(200);
      const cpu0 = cpuNow(pids);
      const res = await underLoad(opts.profile && which === 'gateway', () => openLoop(paths[which], opts.rate, opts.durationMs));
      const cpu1 = cpuNow(pids);
      checkErrors(res, `${opts.label} latency ${which} round ${r + 1}`, sink);
      got[which] = percentiles(res.latencies, [50, 90, 99]);
      pct[which].push(got[which]);
      achieved[which].push((res.calls * 1000) / res.elapsedMs);
      if (which === 'gateway' || which === 'silent') cpu[which].push((cpu1[which]! - cpu0[which]!) / Math.max(1, res.calls));
    }
    for (const w of PROXIES) added[w].push([got[w]![0]! - got.direct![0]!, got[w]![2]! - got.direct![2]!]);
    log(`${opts.label} latency round ${r + 1}/${opts.rounds} @ ${opts.rate}/s: p50 ${ORDER.map((w) => `${w} ${got[w]![0]!.toFixed(3)}`).join(', ')} ms; p99 ${ORDER.map((w) => `${w} ${got[w]![2]!.toFixed(3)}`).join(', ')} ms`);
  }
  const summarize = (w: LatencyPath): Percentiles => ({
    p50: median(pct[w].map((p) => p[0]!)),
    p90: median(pct[w].map((p) => p[1]!)),
    p99: median(pct[w].map((p) => p[2]!)),
    achievedRate: median(achieved[w]),
  });
  return {
    rate: opts.rate,
    direct: summarize('direct'),
    naive: summarize('naive'),
    gateway: summarize('gateway'),
    silent: summarize('silent'),
    naiveAddedP50: median(added.naive.map((a) => a[0]!)),
    naiveAddedP99: median(added.naive.map((a) => a[1]!)),
    addedP50: median(added.gateway.map((a) => a[0]!)),
    addedP99: median(added.gateway.map((a) => a[1]!)),
    silentAddedP50: median(added.silent.map((a) => a[0]!)),
    silentAddedP99: median(added.silent.map((a) => a[1]!)),
    gatewayCpuUsPerCall: median(cpu.gateway),
    silentCpuUsPerCall: median(cpu.silent),
    ...sink,
  };
}

/**
 * "Half load" that really is half: the latency rounds start at half the default gateway's
 * closed-loop maximum, but the closed loop batches (several requests per read and write), so
 * that maximum can be twice what the gateway sustains at a steady open-loop rate, where each
 * request costs its full CPU. When the gateway fell behind (achieved < 95 % of the rate), the
 * rate becomes half of one core at the CPU per call just measured — else the figure measures a
 * queue, not added latency (issue 16: +193 ms in 5a44399's run).
 */
function steadyHalfLoad(rate: number, latency: { gateway: { achievedRate: number }; gatewayCpuUsPerCall: number }): number {
  if (latency.gateway.achievedRate >= 0.95 * rate || !(latency.gatewayCpuUsPerCall > 0)) return rate;
  return Math.max(50, Math.round(0.5e6 / latency.gatewayCpuUsPerCall / 50) * 50);
}

/**
 * The open-loop rounds at half the default gateway's closed-loop maximum (`maxRate` calls/s),
 * measured again at a steady half load when the gateway fell behind that rate.
 */
export async function halfLoadLatency(
  paths: Record<LatencyPath, Path>,
  pids: { gateway: number; silent: number },
  maxRate: number,
  opts: { rounds: number; durationMs: number; label: string; profile: boolean },
): Promise<LatencyResult> {
  const latencyAt = (rate: number) => measureLatency(paths, pids, { ...opts, rate });
  const rate = Math.max(50, Math.round(maxRate / 2 / 50) * 50);
  const latency = await latencyAt(rate);
  const steady = steadyHalfLoad(rate, latency);
  if (steady === rate) return latency;
  log(`${opts.label} latency: the gateway fell behind at ${rate}/s (achieved ${latency.gateway.achievedRate.toFixed(0)}/s, ${latency.gatewayCpuUsPerCall.toFixed(0)} µs/call unbatched); measuring again at ${steady}/s`);
  return latencyAt(steady);
}
