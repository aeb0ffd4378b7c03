/**
 * `node --import tsx bench/wire-shapes.ts [--seconds S] [--rounds N] [--log-level L]`: what
 * a peer's way of sending costs the gateway in system calls and CPU (issue 16, finding 2:
 * "read + write system calls per call: 4.0 in the bench, 5.0 under autocannon").
 *
 * The same JSON tools/call goes, in alternating rounds, from five clients to the gateway
 * (`log.level: silent` unless given) and to the naive pass-through, each in front of two
 * backends: one answering in one write, one writing head and body apart
 * (bench/fast-backend.ts --split).
 * The clients: undici (bench/load.ts: head and body corked into one writev), autocannon (one
 * buffer, one write), fetch (as the MCP SDK's client transport sends: an async-iterable body,
 * head and first chunk corked), and a raw socket sending head and body in one write or in
 * two writes a turn apart (bench/raw-client.ts). For each: calls/s, CPU per call and read +
 * write system calls per call from /proc/<pid>/io. Prints a table; writes nothing.
 *
 * With `--answers`, the backends answer in the shapes real SDK servers send instead (issue 29;
 * bench/fast-backend.ts `--answer`): JSON with a length, chunked JSON, one SSE event, two
 * progress events then the result; each gateway row has its naive row, same run.
 */
import { Agent, fetch } from 'undici';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { autocannonLoop } from './autocannon.js';
import { baseHeaders, callBody, closedLoop, median, openPath, Recorder, type LoopResult, type Path } from './load.js';
import { startBackend, startGateway, startNaiveProxy, type Backend } from './processes.js';
import { rawLoop } from './raw-client.js';
import { processCpuUs, processSyscalls } from './system.js';

const CONNECTIONS = 16;
const argv = process.argv.slice(2);
const option = (flag: string, fallback: number) => (argv.includes(flag) ? Number(argv[argv.indexOf(flag) + 1]) : fallback);
const roundMs = option('--seconds', 2) * 1000;
const rounds = option('--rounds', 2);
const logLevel = argv.includes('--log-level') ? argv[argv.indexOf('--log-level') + 1] : 'silent';
const answers = argv.includes('--answers');
const ANSWER_SHAPES = ['chunked', 'sse-one', 'sse-progress'] as const;

/** The backends measured and each one's label: today's two writes of a length-declared answer, or the SDK answer shapes. */
async function startBackends(): Promise<Array<Backend & { shape: string }>> {
  const length = { ...(await startBackend(false)), shape: answers ? 'JSON with length' : 'backend 1 write' };
  if (!answers) return [length, { ...(await startBackend(false, true)), name: 'fast-split', shape: 'backend head | body' }];
  const shaped = await Promise.all(ANSWER_SHAPES.map(async (answer) => ({ ...(await startBackend(false, false, answer)), name: `fast-${answer}`, shape: answer })));
  return [length, ...shaped];
}

/** fetch as the MCP SDK's StreamableHTTPClientTransport calls it (keep-alive through one Agent). */
async function fetchLoop(p: Path, connections: number, durationMs: number): Promise<LoopResult> {
  const dispatcher = new Agent({ connections, keepAliveTimeout: 60_000 });
  const rec = new Recorder(65_536);
  const start = performance.now();
  let id = 3_000_000_000;
  const worker = async () => {
    while (performance.now() < start + durationMs) {
      const t0 = performance.now();
      const res = await fetch(`${p.origin}${p.path}`, { method: 'POST', headers: p.headers, body: callBody(id++), dispatcher });
      const text = await res.text();
      if (res.status === 200 && text.includes('"result"')) rec.add(performance.now() - t0);
      else rec.fail(new Error(`HTTP ${res.status}`));
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  await dispatcher.close();
  return { calls: rec.n, errors: rec.errors, elapsedMs: performance.now() - start, latencies: rec.latencies.subarray(0, rec.n), firstError: rec.firstError };
}

const CLIENTS: Record<string, (p: Path, ms: number) => Promise<LoopResult>> = {
  'undici (bench)': (p, ms) => closedLoop(p, CONNECTIONS, { durationMs: ms }),
  autocannon: (p, ms) => autocannonLoop(p, CONNECTIONS, ms),
  'fetch (MCP SDK)': (p, ms) => fetchLoop(p, CONNECTIONS, ms),
  'raw, 1 write': (p, ms) => rawLoop(p, CONNECTIONS, ms, false),
  'raw, head | body': (p, ms) => rawLoop(p, CONNECTIONS, ms, true),
};

/** With `--answers`: the two load generators of the harness. */
const clients = answers ? { 'undici (bench)': CLIENTS['undici (bench)']!, autocannon: CLIENTS.autocannon! } : CLIENTS;

interface Cell {
  rate: number[];
  cpu: number[];
  reads: number[];
  writes: number[];
}

async function main(): Promise<void> {
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  const [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
  const backends = await startBackends();
  const gateway = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends, logLevel });
  const naive = await Promise.all(backends.map((b) => startNaiveProxy(b)));
  try {
    const headers = baseHeaders(await oauth.token({ sub: 'bench-user', aud: gateway.audience }));
    const servers: Array<{ label: string; pid: number; path: Path }> = [];
    for (const [i, b] of backends.entries()) {
      const shape = b.shape;
      const direct = await openPath('direct', `http://127.0.0.1:${b.port}`, '/mcp', headers);
      await direct.pool.close();
      servers.push(
        { label: `gateway, ${shape}`, pid: gateway.child.pid, path: await openPath('gateway', gateway.url, `/mcp/${b.name ?? 'fast'}`, headers) },
        { label: `naive, ${shape}`, pid: naive[i]!.child.pid, path: await openPath('naive', `http://127.0.0.1:${naive[i]!.port}`, '/mcp/x', headers, direct.headers['mcp-session-id']) },
      );
    }
    const cells = new Map<string, Cell>();
    for (const s of servers) for (const run of Object.values(clients)) await run(s.path, 1000);
    for (let r = 0; r < rounds; r++) {
      for (const s of r % 2 ? [...servers].reverse() : servers) {
        for (const [client, run] of Object.entries(clients)) {
          const key = `${s.label}\t${client}`;
          const cell = cells.get(key) ?? { rate: [], cpu: [], reads: [], writes: [] };
          cells.set(key, cell);
          const [cpu0, io0] = [processCpuUs(s.pid), processSyscalls(s.pid)];
          const res = await run(s.path, roundMs);
          const [cpu1, io1] = [processCpuUs(s.pid), processSyscalls(s.pid)];
          if (res.errors) process.stderr.write(`${key}: ${res.errors} failed (${res.firstError})\n`);
          const n = Math.max(1, res.calls);
          cell.rate.push((res.calls * 1000) / res.elapsedMs);
          cell.cpu.push((cpu1 - cpu0) / n);
          cell.reads.push((io1.reads - io0.reads) / n);
          cell.writes.push((io1.writes - io0.writes) / n);
        }
      }
    }
    process.stdout.write(`\n${'server, backend answers'.padEnd(30)}${'client'.padEnd(20)}${'calls/s'.padStart(8)}${'CPU/call µs'.padStart(13)}${'reads/call'.padStart(12)}${'writes/call'.padStart(13)}\n`);
    for (const [key, c] of cells) {
      const [server, client] = key.split('\t') as [string, string];
      // The gateway's CPU per call against the naive pass-through's, same backend shape, client and run.
      const naiveCell = server.startsWith('gateway, ') ? cells.get(`naive, ${server.slice('gateway, '.length)}\t${client}`) : undefined;
      const ratio = naiveCell ? `${(median(c.cpu) / median(naiveCell.cpu)).toFixed(2)}× naive` : '';
      process.stdout.write(`${server.padEnd(30)}${client.padEnd(20)}${median(c.rate).toFixed(0).padStart(8)}${median(c.cpu).toFixed(0).padStart(13)}${median(c.reads).toFixed(2).padStart(12)}${median(c.writes).toFixed(2).padStart(13)}  ${ratio}\n`);
    }
    for (const s of servers) await s.path.pool.close();
  } finally {
    await Promise.allSettled([gateway.child.stop(), ...naive.map((n) => n.child.stop()), ...backends.map((b) => b.child.stop()), oauth.stop(), redis.stop()]);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`wire-shapes failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
