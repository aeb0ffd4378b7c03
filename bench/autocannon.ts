/**
 * The second, independent load generator (issue 16): autocannon, a load tool written for
 * benchmarking Node servers, not by this project. The undici one (bench/load.ts) is the same
 * client the gateway uses towards its backends; a figure that held only for that client's
 * way of sending would not be the product's figure, so the throughput rounds run under both.
 *
 * How autocannon sends, as opposed to undici: head and body built into one buffer, one
 * `write` per request, `Connection: keep-alive`; it reads answers with http-parser-js, and
 * opens its connections anew for each run. Each request gets a new body with its own
 * JSON-RPC id (`setupRequest` rebuilds the buffer), as a real client's would. Pipelining 1,
 * like the undici generator.
 *
 * Latency is taken from each response event (float ms), not from autocannon's histogram,
 * which keeps whole milliseconds. It has no open-loop mode worth the name (`overallRate`
 * releases each second's budget in a burst), so the half-load latency stays with bench/load.ts.
 */
import autocannon from 'autocannon';
import { callBody, Recorder, type LoopResult, type Path } from './load.js';

let nextId = 1_000_000_000;

/**
 * Closed loop under autocannon: `connections` connections, one request in flight on each,
 * for `durationMs`. A call counts when the answer is a 200 whose body carries a `result`.
 */
export async function autocannonLoop(p: Path, connections: number, durationMs: number): Promise<LoopResult> {
  const rec = new Recorder(65_536);
  let ok = 0;
  const start = performance.now();
  const result = await autocannon({
    url: `${p.origin}${p.path}`,
    connections,
    pipelining: 1,
    duration: durationMs / 1000,
    method: 'POST',
    headers: p.headers,
    requests: [
      {
        // One new body per request: a fresh JSON-RPC id each time.
        setupRequest: (req) => ({ ...req, body: callBody(nextId++) }),
        onResponse: (status, body) => {
          if (status === 200 && body.includes('"result"')) ok++;
          else rec.fail(new Error(`answer was HTTP ${status} without a result: ${body.slice(0, 200)}`));
        },
      },
    ],
    // Runs after onResponse for the same answer: its latency in float ms.
    setupClient: (client) => client.on('response', (status: number, _bytes: number, ms: number) => status === 200 && rec.add(ms)),
  });
  const elapsedMs = performance.now() - start;
  const firstError = rec.firstError ?? (result.errors > 0 ? `${result.errors} connection errors (${result.timeouts} timeouts)` : undefined);
  return { calls: ok, errors: rec.errors + result.errors, elapsedMs, latencies: rec.latencies.subarray(0, rec.n), firstError };
}
