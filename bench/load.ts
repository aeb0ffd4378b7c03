/**
 * The load generator: the same `tools/call` request, sent the same way to either path
 * (direct to the backend, or through the gateway), with undici keep-alive connections and
 * pipelining 1 (one request in flight per connection, as MCP clients do).
 *
 *  - closedLoop: N connections, each sends its next request as soon as the previous answer
 *    is read completely; runs for a duration or a number of calls. Measures the maximum
 *    throughput at that concurrency.
 *  - openLoop: requests are released at a fixed rate whatever the answers do (on a 1 ms
 *    timer grid, so in bursts of rate/1000); latency is measured per request from the moment
 *    it is handed to undici to the end of its body.
 */
import { Pool } from 'undici';

export const PROTOCOL_VERSION = '2025-11-25';

/** One way to reach an MCP endpoint with a session. */
export interface Path {
  label: string;
  pool: Pool;
  /** The pool's origin (`http://127.0.0.1:N`), for the other load generator (bench/autocannon.ts). */
  origin: string;
  /** Request path, e.g. `/mcp` or `/mcp/fast`. */
  path: string;
  /** Headers of every call (session, token, Accept, Content-Type, protocol version). */
  headers: Record<string, string>;
  /** The body of call number `id`, when not {@link callBody} (the stateless era's carries `_meta`). */
  body?: (id: number) => string;
}

export function createPool(origin: string, connections: number): Pool {
  return new Pool(origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 120_000,
    keepAliveMaxTimeout: 120_000,
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
}

export function baseHeaders(token: string): Record<string, string> {
  return {
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    'mcp-protocol-version': PROTOCOL_VERSION,
    authorization: `Bearer ${token}`,
  };
}

let nextId = 1;
/** The tools/call body both load generators send, with a fresh JSON-RPC id each time. */
export const callBody = (id: number) =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard"}}}`;

/** One tools/call; resolves true when the answer is a 200 carrying a result. */
export async function call(p: Path): Promise<boolean> {
  const id = nextId++;
  const res = await p.pool.request({ path: p.path, method: 'POST', headers: p.headers, body: p.body ? p.body(id) : callBody(id) });
  const text = await res.body.text();
  return res.statusCode === 200 && text.includes('"result"');
}

/** POST initialize (+ notifications/initialized); returns the session id. */
export async function openSession(pool: Pool, path: string, headers: Record<string, string>): Promise<string> {
  const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"${PROTOCOL_VERSION}","capabilities":{},"clientInfo":{"name":"switchboard-bench","version":"1.0.0"}}}`;
  const { 'mcp-session-id': _drop, ...h } = headers;
  const res = await pool.request({ path, method: 'POST', headers: h, body: init });
  const text = await res.body.text();
  const session = res.headers['mcp-session-id'];
  if (res.statusCode !== 200 || typeof session !== 'string') {
    throw new Error(`initialize on ${path} answered HTTP ${res.statusCode} without a session: ${text.slice(0, 300)}`);
  }
  const note = await pool.request({
    path,
    method: 'POST',
    headers: { ...h, 'mcp-session-id': session },
    body: '{"jsonrpc":"2.0","method":"notifications/initialized"}',
  });
  await note.body.dump();
  if (note.statusCode !== 202) throw new Error(`notifications/initialized on ${path} answered HTTP ${note.statusCode}`);
  return session;
}

/**
 * A Path with a pool of its own (64 connections) and a session: opened through it by
 * `initialize`, or `session` when given (the naive pass-through reuses the direct path's
 * backend session). The caller closes `pool`.
 */
export async function openPath(label: string, origin: string, path: string, headers: Record<string, string>, session?: string): Promise<Path> {
  const pool = createPool(origin, 64);
  const id = session ?? (await openSession(pool, path, headers));
  return { label, pool, origin, path, headers: { ...headers, 'mcp-session-id': id } };
}

export interface LoopResult {
  calls: number;
  errors: number;
  elapsedMs: number;
  /** Per-call latency in ms, in completion order. */
  latencies: Float64Array;
  firstError?: string;
}

/** Latencies of the calls that succeeded, and the failures. */
export class Recorder {
  latencies: Float64Array;
  n = 0;
  errors = 0;
  firstError: string | undefined;
  constructor(capacity: number) {
    this.latencies = new Float64Array(capacity);
  }
  add(ms: number): void {
    if (this.n === this.latencies.length) {
      const bigger = new Float64Array(this.latencies.length * 2);
      bigger.set(this.latencies);
      this.latencies = bigger;
    }
    this.latencies[this.n++] = ms;
  }
  fail(err: unknown): void {
    this.errors++;
    this.firstError ??= err instanceof Error ? err.message : String(err);
  }
}

/** `connections` workers, each with one request in flight, until the duration or the call count is reached. */
export async function closedLoop(p: Path, connections: number, stop: { durationMs: number } | { count: number }): Promise<LoopResult> {
  const rec = new Recorder(65_536);
  const start = performance.now();
  const deadline = 'durationMs' in stop ? start + stop.durationMs : Infinity;
  let budget = 'count' in stop ? stop.count : Infinity;
  const worker = async () => {
    while (budget-- > 0 && performance.now() < deadline) {
      const t0 = performance.now();
      try {
        if (await call(p)) rec.add(performance.now() - t0);
        else rec.fail(new Error('answer was not a 200 with a result'));
      } catch (err) {
        rec.fail(err);
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const elapsedMs = performance.now() - start;
  return { calls: rec.n, errors: rec.errors, elapsedMs, latencies: rec.latencies.subarray(0, rec.n), firstError: rec.firstError };
}

/** Requests at `rate` per second for `durationMs`, whatever the answers do. */
export async function openLoop(p: Path, rate: number, durationMs: number): Promise<LoopResult & { sent: number }> {
  const rec = new Recorder(Math.ceil((rate * durationMs) / 1000) + 16);
  const start = performance.now();
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  const fire = () => {
    const t0 = performance.now();
    const pending: Promise<void> = call(p).then(
      (ok) => {
        if (ok) rec.add(performance.now() - t0);
        else rec.fail(new Error('answer was not a 200 with a result'));
      },
      (err: unknown) => rec.fail(err),
    );
    inFlight.add(pending);
    void pending.finally(() => inFlight.delete(pending));
  };
  await new Promise<void>((resolve) => {
    const tick = () => {
      const elapsed = performance.now() - start;
      const due = Math.min(Math.floor((elapsed * rate) / 1000), Math.floor((durationMs * rate) / 1000));
      while (sent < due) {
        sent++;
        fire();
      }
      if (elapsed >= durationMs) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  await Promise.all(inFlight);
  const elapsedMs = performance.now() - start;
  return { calls: rec.n, errors: rec.errors, elapsedMs, sent, latencies: rec.latencies.subarray(0, rec.n), firstError: rec.firstError };
}

/** Percentile (0..100) of a sample; sorts a copy. */
export function percentiles(sample: Float64Array, ps: number[]): number[] {
  if (sample.length === 0) return ps.map(() => NaN);
  const sorted = Float64Array.from(sample).sort();
  return ps.map((p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!);
}

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}
