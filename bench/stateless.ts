/**
 * The MCP 2026-07-28 `tools/call` against the 2025-11-25 one (issue 15, "Done when": CPU per
 * call no higher than the 2025 path's). The same gateway (the silent one, so the log does not
 * blur the difference), the same minimal backend, the same echo call, three ways:
 *
 * - `session`: a 2025-11-25 client in its session, to the backend in its session (`/mcp/fast`);
 * - `bridged`: a 2026-07-28 client — no session, `_meta` in the body, the standard headers — to
 *   the same 2025 backend, which the gateway reaches through its own session with it and
 *   whose answer it gives `resultType` (src/stateless/legacy-bridge.ts);
 * - `native`: the same 2026 request to the backend as a 2026-07-28 one (`/mcp/fast-2026`, the
 *   same process reached through an entry pinned to that revision, which it then serves
 *   without a session): each era end to end;
 * - `sized`: the 2025 session call as big as the 2026 request — its `_meta` under names the
 *   gateway passes on unread, and `Mcp-Method`, so that it has as many header lines (the
 *   2025 one carries `Mcp-Session-Id`, the 2026 one `Mcp-Method` and `Mcp-Name`) — so that
 *   native ÷ sized is the gateway's handling of each era for requests of one size, and
 *   sized ÷ session what the revision's bigger request costs by itself (bench/README.md).
 *
 * Closed-loop rounds, the order rotating every round; the ratios are per round, median.
 */
import { closedLoop, median, type Path } from './load.js';
import { checkErrors, cpuNow, log, sleep, type ErrorSink } from './sampling.js';

export interface StatelessResult extends ErrorSink {
  sessionCpuUsPerCall: number;
  /** The 2026 client through the bridge to the 2025 backend. */
  statelessCpuUsPerCall: number;
  /** Median over rounds of bridged ÷ session CPU per call. */
  ratio: number;
  /** The 2026 client to the backend as a 2026 one. */
  nativeCpuUsPerCall: number;
  /** Median over rounds of native ÷ session CPU per call. */
  nativeRatio: number;
  /** The 2025 session call with a request the size of the 2026 one. */
  sizedCpuUsPerCall: number;
  /** Median over rounds of native ÷ sized CPU per call: the eras' handling for requests of one size. */
  sameSizeRatio: number;
  sessionCallsPerSec: number;
  statelessCallsPerSec: number;
  nativeCallsPerSec: number;
}

const META = '{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}';

/** The backend entry bench/processes.ts pins to 2026-07-28 (the JSON backend again). */
export const NATIVE_BACKEND = 'fast-2026';

/** The stateless twin of a session path: same token, no session, 2026 headers and body; `path` another endpoint when given. */
export function statelessPath(session: Path, path = session.path): Path {
  const { 'mcp-session-id': _session, ...headers } = session.headers;
  void _session;
  return {
    ...session,
    path,
    label: `${path} (2026-07-28)`,
    headers: { ...headers, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' },
    body: (id) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard"},"_meta":${META}}}`,
  };
}

/** The 2025 session call with the 2026 request's size: its `_meta` bytes under names the gateway does not read, and as many header lines. */
export function sizedSessionPath(session: Path): Path {
  const body = statelessPath(session).body!;
  return {
    ...session,
    label: `${session.path} (2025-11-25, 2026-sized)`,
    headers: { ...session.headers, 'mcp-method': 'tools/call' },
    body: (id) => body(id).replaceAll('io.modelcontextprotocol/', 'io.modelcontextprotocoX/'),
  };
}

type Which = 'session' | 'sized' | 'bridged' | 'native';
const ORDERS: ReadonlyArray<readonly Which[]> = [
  ['session', 'bridged', 'native', 'sized'],
  ['bridged', 'native', 'sized', 'session'],
  ['native', 'sized', 'session', 'bridged'],
  ['sized', 'session', 'bridged', 'native'],
];

export async function measureStateless(session: Path, pid: number, opts: { rounds: number; durationMs: number; warmupMs: number; connections: number }): Promise<StatelessResult> {
  const paths: Record<Which, Path> = { session, sized: sizedSessionPath(session), bridged: statelessPath(session), native: statelessPath(session, `/mcp/${NATIVE_BACKEND}`) };
  for (const p of Object.values(paths)) await closedLoop(p, opts.connections, { durationMs: opts.warmupMs });
  const cpu: Record<Which, number[]> = { session: [], sized: [], bridged: [], native: [] };
  const rate: Record<Which, number[]> = { session: [], sized: [], bridged: [], native: [] };
  const ratios = { bridged: [] as number[], native: [] as number[], sameSize: [] as number[] };
  const sink: ErrorSink = { errors: 0 };
  for (let r = 0; r < opts.rounds; r++) {
    for (const which of ORDERS[r % ORDERS.length]!) {
      await sleep(200);
      const cpu0 = cpuNow({ gateway: pid });
      const res = await closedLoop(paths[which], opts.connections, { durationMs: opts.durationMs });
      const cpu1 = cpuNow({ gateway: pid });
      checkErrors(res, `stateless-era ${which} round ${r + 1}`, sink);
      cpu[which].push((cpu1.gateway! - cpu0.gateway!) / Math.max(1, res.calls));
      rate[which].push((res.calls * 1000) / res.elapsedMs);
    }
    ratios.bridged.push(cpu.bridged.at(-1)! / cpu.session.at(-1)!);
    ratios.native.push(cpu.native.at(-1)! / cpu.session.at(-1)!);
    ratios.sameSize.push(cpu.native.at(-1)! / cpu.sized.at(-1)!);
    log(
      `2026-07-28 tools/call round ${r + 1}/${opts.rounds}: session ${cpu.session.at(-1)!.toFixed(0)} µs/call, ` +
        `bridged ${cpu.bridged.at(-1)!.toFixed(0)} (÷ ${ratios.bridged.at(-1)!.toFixed(3)}), native ${cpu.native.at(-1)!.toFixed(0)} (÷ ${ratios.native.at(-1)!.toFixed(3)}), ` +
        `2025 at the 2026 size ${cpu.sized.at(-1)!.toFixed(0)} (native ÷ it ${ratios.sameSize.at(-1)!.toFixed(3)})`,
    );
  }
  return {
    ...sink,
    sessionCpuUsPerCall: median(cpu.session),
    statelessCpuUsPerCall: median(cpu.bridged),
    ratio: median(ratios.bridged),
    nativeCpuUsPerCall: median(cpu.native),
    nativeRatio: median(ratios.native),
    sizedCpuUsPerCall: median(cpu.sized),
    sameSizeRatio: median(ratios.sameSize),
    sessionCallsPerSec: median(rate.session),
    statelessCallsPerSec: median(rate.bridged),
    nativeCallsPerSec: median(rate.native),
  };
}
