/**
 * What OpenTelemetry costs per `tools/call` (issue 30 §1 "Cost"): the gateway's own CPU
 * (user + system of its process, from /proc) per call, telemetry off (no `telemetry` key: the
 * SDK is not loaded) against on at sampling 1.0 (every call traced and exported) and on at
 * sampling 0 with no client context (nothing recorded: what remains is the parsing, the
 * `_meta` injection and the histograms), exporting to a real OTLP/HTTP receiver
 * (test/fixtures/otlp-receiver.ts). Real gateway (the CLI), real Redis, the minimal backend
 * (bench/fast-backend.ts); calls are sequential on one session, each with a client
 * `traceparent` (but in the sampling-0 setup). The setups alternate over several rounds and the median is reported, since
 * the CPUs are shared.
 *
 *   node --import tsx bench/telemetry-cost.ts [calls per round, default 2000] [rounds, default 3] [--base-root DIR]
 *
 * `--base-root DIR` (a worktree of another commit, e.g. `git worktree add --detach DIR main`
 * with node_modules linked in) adds the two telemetry-on setups run from DIR's src/cli.ts, in
 * the same rounds: a before/after under the same noise.
 *
 * Bounded: a fixed number of calls per round.
 */
import { readFile } from 'node:fs/promises';
import { startFixtureChild } from '../test/helpers/fixture-child.js';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { startBackend, startGateway } from './processes.js';

const baseAt = process.argv.indexOf('--base-root');
const BASE_ROOT = baseAt > 0 ? process.argv[baseAt + 1] : undefined;
const positional = process.argv.slice(2).filter((_, i, all) => all[i] !== '--base-root' && all[i - 1] !== '--base-root');
const CALLS = Number(positional[0] ?? 2000);
const ROUNDS = Number(positional[1] ?? 3);
const WARMUP = 300;
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** utime + stime of a process, in µs (/proc/<pid>/stat fields 14 and 15, in clock ticks of 10 ms). */
async function cpuMicros(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function post(url: string, headers: Record<string, string>, body: unknown): Promise<Response> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`HTTP ${res.status}`);
  return res;
}

async function round(setup: Record<string, unknown>, traced: boolean, deps: { redisUrl: string; issuer: string; token: (aud: string) => Promise<string>; backend: Awaited<ReturnType<typeof startBackend>> }, root?: string): Promise<number> {
  const gw = await startGateway({ redisUrl: deps.redisUrl, issuer: deps.issuer, backends: [deps.backend], extra: setup, root });
  try {
    const url = `${gw.url}/mcp/fast`;
    const auth = { authorization: `Bearer ${await deps.token(gw.audience)}` };
    const init = await post(url, auth, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
    const session = { ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25', ...(traced ? { traceparent: TRACEPARENT } : {}) };
    await post(url, session, { jsonrpc: '2.0', method: 'notifications/initialized' });
    const call = (id: number) => post(url, session, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hello', n: id } } });
    for (let i = 1; i <= WARMUP; i++) await call(i);
    const before = await cpuMicros(gw.child.pid);
    for (let i = 1; i <= CALLS; i++) await call(WARMUP + i);
    return ((await cpuMicros(gw.child.pid)) - before) / CALLS;
  } finally {
    await gw.child.stop();
  }
}

const [redis, oauth, receiver, backend] = await Promise.all([startRedis(), startOAuthServer(), startFixtureChild('otlp-receiver.ts'), startBackend(false)]);
try {
  const deps = { redisUrl: redis.url, issuer: oauth.issuer, backend, token: (aud: string) => oauth.token({ sub: 'bench', aud, scope: 'mcp' }) };
  const setups: Array<[string, Record<string, unknown>]> = [
    ['off (no telemetry key)', {}],
    ['on, sampling 1.0', { telemetry: { otlp: { endpoint: receiver.url }, sampling: { ratio: 1 } } }],
    // Client contexts are sampled (flag 01) and followed by the parent-based sampler: a client without one is what ratio 0 spares.
    ['on, sampling 0, no client context', { telemetry: { otlp: { endpoint: receiver.url }, sampling: { ratio: 0 } } }],
  ];
  const runs: Array<[string, Record<string, unknown>, string | undefined]> = setups.map(([name, setup]) => [name, setup, undefined]);
  if (BASE_ROOT) for (const [name, setup] of setups.slice(1)) runs.push([`base: ${name}`, setup, BASE_ROOT]);
  const results = new Map<string, number[]>(runs.map(([name]) => [name, []]));
  for (let r = 0; r < ROUNDS; r++) for (const [name, setup, root] of runs) results.get(name)!.push(await round(setup, !name.includes('no client context'), deps, root));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const off = median(results.get(setups[0]![0])!);
  for (const [name, xs] of results) {
    const m = median(xs);
    console.log(`${name.padEnd(34)} ${m.toFixed(0).padStart(5)} µs CPU per call  (+${(m - off).toFixed(0)} µs; rounds: ${xs.map((x) => x.toFixed(0)).join(', ')})`);
  }
  const received = (await (await fetch(`${receiver.url}/recorded`)).json()) as { spans: unknown[] };
  console.log(`receiver got ${received.spans.length} spans`);
} finally {
  await Promise.allSettled([redis.stop(), oauth.stop(), receiver.child.stop(), backend.child.stop()]);
}
