/**
 * What a call through a virtual server (issue 31 §1, docs/virtual-servers.md) costs against
 * the same call through the aggregated `/mcp` it is built on — issue 31 "Done when": within
 * 5 %. Run by `npm run bench` (bench/run.ts, on the silent gateway) and alone by
 * bench/virtual.ts.
 *
 * The virtual server `curated` offers the JSON fast backend's `echo` as `say` with one
 * argument pinned: its whole work per call — the name looked up, the client's arguments
 * checked, the pinned one set, the request re-serialized. Both paths get the same closed-loop
 * load in alternating rounds (the order flips every round), so the noise of a shared machine
 * hits both alike; the ratios are per round, median.
 */
import { closedLoop, median, openPath, type Path } from './load.js';
import { checkErrors, cpuNow, log, sleep, type ErrorSink } from './sampling.js';

/** The `servers` entry a gateway under the bench gets (its backend `fast` is the JSON fast backend). */
export const VIRTUAL_SERVERS = [{ name: 'curated', tools: [{ from: 'fast.echo', as: 'say', arguments: { lang: { value: 'en' } } }] }];

/** The same call under each path's name for the tool; the virtual one leaves the pinned argument out. */
const BODIES = {
  '/mcp': (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"fast__echo","arguments":{"message":"hello, switchboard","lang":"en"}}}`,
  '/mcp/curated': (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"say","arguments":{"message":"hello, switchboard"}}}`,
};

export interface VirtualResult extends ErrorSink {
  mcpCpuUsPerCall: number;
  virtualCpuUsPerCall: number;
  /** Median over rounds of virtual ÷ `/mcp` CPU per call (target ≤ 1.05). */
  cpuRatio: number;
  mcpCallsPerSec: number;
  virtualCallsPerSec: number;
  /** Median over rounds of virtual ÷ `/mcp` calls/s. */
  rateRatio: number;
}

/** Opens a session on `/mcp` and on `/mcp/curated` of the gateway at `url`. */
export async function openVirtualPaths(url: string, headers: Record<string, string>): Promise<[Path, Path]> {
  const mcp = await openPath('/mcp', url, '/mcp', headers);
  const virtual = await openPath('/mcp/curated', url, '/mcp/curated', headers);
  return [{ ...mcp, body: BODIES['/mcp'] }, { ...virtual, body: BODIES['/mcp/curated'] }];
}

export async function measureVirtual([mcp, virtual]: [Path, Path], pid: number, opts: { rounds: number; durationMs: number; warmupMs: number; connections: number }): Promise<VirtualResult> {
  const paths = [mcp, virtual];
  for (const p of paths) await closedLoop(p, opts.connections, { durationMs: opts.warmupMs });
  const cpu: number[][] = [[], []];
  const rate: number[][] = [[], []];
  const sink: ErrorSink = { errors: 0 };
  for (let r = 0; r < opts.rounds; r++) {
    for (const i of r % 2 === 0 ? [0, 1] : [1, 0]) {
      await sleep(100);
      const before = cpuNow({ gateway: pid });
      const res = await closedLoop(paths[i]!, opts.connections, { durationMs: opts.durationMs });
      checkErrors(res, `virtual server ${paths[i]!.label} round ${r + 1}`, sink);
      cpu[i]!.push((cpuNow({ gateway: pid }).gateway! - before.gateway!) / Math.max(1, res.calls));
      rate[i]!.push((res.calls * 1000) / res.elapsedMs);
    }
    log(`virtual server round ${r + 1}/${opts.rounds}: /mcp ${cpu[0]!.at(-1)!.toFixed(0)} µs/call, /mcp/curated ${cpu[1]!.at(-1)!.toFixed(0)} (÷ ${(cpu[1]!.at(-1)! / cpu[0]!.at(-1)!).toFixed(3)})`);
  }
  return {
    ...sink,
    mcpCpuUsPerCall: median(cpu[0]!),
    virtualCpuUsPerCall: median(cpu[1]!),
    cpuRatio: median(cpu[1]!.map((c, r) => c / cpu[0]![r]!)),
    mcpCallsPerSec: median(rate[0]!),
    virtualCallsPerSec: median(rate[1]!),
    rateRatio: median(rate[1]!.map((c, r) => c / rate[0]![r]!)),
  };
}
