/**
 * The MCP 2026-07-28 `tools/call` against the 2025-11-25 one (issue 15, "Done when": CPU per
 * call no higher than the 2025 path's). The same gateway (the silent one, so the log does not
 * blur the difference), the same backend, the same echo call: once in a 2025 session, once
 * statelessly — no session, `_meta` in the body, the standard headers — which the gateway
 * checks and relays through its own session with the 2025-era bench backend (src/stateless/),
 * adding `resultType` to the answer. Closed-loop rounds, the two orders alternating.
 */
import { closedLoop, median, type Path } from './load.js';
import { checkErrors, cpuNow, log, sleep, type ErrorSink } from './sampling.js';

export interface StatelessResult extends ErrorSink {
  sessionCpuUsPerCall: number;
  statelessCpuUsPerCall: number;
  /** Median over rounds of stateless ÷ session CPU per call. */
  ratio: number;
  sessionCallsPerSec: number;
  statelessCallsPerSec: number;
}

const META = '{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}';

/** The stateless twin of a session path: same endpoint and token, no session, 2026 headers and body. */
export function statelessPath(session: Path): Path {
  const { 'mcp-session-id': _session, ...headers } = session.headers;
  void _session;
  return {
    ...session,
    label: `${session.label} (2026-07-28)`,
    headers: { ...headers, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'echo' },
    body: (id) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard"},"_meta":${META}}}`,
  };
}

export async function measureStateless(session: Path, pid: number, opts: { rounds: number; durationMs: number; warmupMs: number; connections: number }): Promise<StatelessResult> {
  const stateless = statelessPath(session);
  const paths = { session, stateless };
  for (const p of [session, stateless]) await closedLoop(p, opts.connections, { durationMs: opts.warmupMs });
  const cpu = { session: [] as number[], stateless: [] as number[] };
  const rate = { session: [] as number[], stateless: [] as number[] };
  const ratios: number[] = [];
  const sink: ErrorSink = { errors: 0 };
  for (let r = 0; r < opts.rounds; r++) {
    const order = r % 2 === 0 ? (['session', 'stateless'] as const) : (['stateless', 'session'] as const);
    for (const which of order) {
      await sleep(200);
      const cpu0 = cpuNow({ gateway: pid });
      const res = await closedLoop(paths[which], opts.connections, { durationMs: opts.durationMs });
      const cpu1 = cpuNow({ gateway: pid });
      checkErrors(res, `stateless-era ${which} round ${r + 1}`, sink);
      cpu[which].push((cpu1.gateway! - cpu0.gateway!) / Math.max(1, res.calls));
      rate[which].push((res.calls * 1000) / res.elapsedMs);
    }
    ratios.push(cpu.stateless.at(-1)! / cpu.session.at(-1)!);
    log(`2026-07-28 tools/call round ${r + 1}/${opts.rounds}: session ${cpu.session.at(-1)!.toFixed(0)} µs/call, stateless ${cpu.stateless.at(-1)!.toFixed(0)} µs/call (÷ ${ratios.at(-1)!.toFixed(3)})`);
  }
  return {
    ...sink,
    sessionCpuUsPerCall: median(cpu.session),
    statelessCpuUsPerCall: median(cpu.stateless),
    ratio: median(ratios),
    sessionCallsPerSec: median(rate.session),
    statelessCallsPerSec: median(rate.stateless),
  };
}
