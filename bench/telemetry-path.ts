/**
 * What the telemetry adds to a `tools/call` when nothing is sampled (issue 44 part 1, "metrics
 * only" ≤ 1.03× a plain call), in process: the SERVER scope of the route (mcp/routes.ts), the
 * CLIENT face (telemetry/client-span-backend.ts) around a backend whose answer has already
 * arrived in an {@link ExchangeBody} (the backend client's own body class), the answer held
 * as the route holds it (backends/held-answer.ts; for SSE, its one event read as
 * relaySeeAnswer reads it), the scope ended. The base is the same without the telemetry. No
 * network and no Redis: only the gateway's own work on the call is timed. Two answers: chunked
 * JSON (v2 SDK servers) and one SSE event (v1 SDK servers).
 *
 *   node --import tsx bench/telemetry-path.ts [--calls N] [--rounds R]
 *
 * The request the scope reads is a plain object with the fields the SERVER span reads of a
 * Fastify request (headers, body, ip, socket port, HTTP version, principal). CPU time of this
 * process per call (user + system), rounds rotating the setups; the added CPU is taken
 * against the base within each round, median over rounds. The OTLP endpoint is a closed port:
 * sampling 0 exports no span, and the metric export (every 60 s) does not come within a run.
 */
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../src/backends/backend.js';
import { ExchangeBody } from '../src/backends/exchange.js';
import { holdAnswer } from '../src/backends/held-answer.js';
import { parseConfig } from '../src/config/load.js';
import { withClientSpans } from '../src/telemetry/client-span-backend.js';
import { startTelemetry, type Telemetry } from '../src/telemetry/telemetry.js';
import { eventDataOf } from '../src/wire/sse.js';

const at = (flag: string) => (process.argv.includes(flag) ? Number(process.argv[process.argv.indexOf(flag) + 1]) : undefined);
const CALLS = at('--calls') ?? 20_000;
const ROUNDS = at('--rounds') ?? 7;

const config = parseConfig({
  publicUrl: 'https://mcp.example.com',
  auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
  backends: [{ name: 'fast', url: 'http://127.0.0.1:9/mcp' }],
  telemetry: { otlp: { endpoint: 'http://127.0.0.1:9' }, sampling: { ratio: 0 } },
});
const quiet = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {}, child: () => quiet } as unknown as FastifyBaseLogger;
const telemetry = (await startTelemetry(config, quiet)) as Telemetry;

const answerOf = (id: number) => `{"result":{"content":[{"type":"text","text":"hello, switchboard"}]},"jsonrpc":"2.0","id":${id}}`;
const SHAPES = {
  chunked: { contentType: 'application/json', text: answerOf },
  'sse-one': { contentType: 'text/event-stream', text: (id: number) => `event: message\ndata: ${answerOf(id)}\n\n` },
} as const;
type Shape = keyof typeof SHAPES;

/** The backend client: the answer arrived whole (headers, body and end in one read, as from a local server). */
function backend(shape: Shape): McpBackend {
  const { contentType, text } = SHAPES[shape];
  return {
    name: 'fast',
    config: config.backends[0]!,
    post: async (body: string): Promise<BackendResponse> => {
      const id = (JSON.parse(body) as { id: number }).id;
      const res = new ExchangeBody(() => {}, () => {});
      res.push(Buffer.from(text(id)));
      res.end();
      return { status: 200, headers: { 'content-type': contentType, 'transfer-encoding': 'chunked' }, contentType, body: res };
    },
    get: () => Promise.reject(new Error('unused')),
    delete: () => Promise.reject(new Error('unused')),
    close: async () => {},
  };
}

const request = {
  headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25', 'mcp-session-id': 'gateway-session-1', authorization: 'Bearer x', host: '127.0.0.1:3000' },
  ip: '127.0.0.1',
  socket: { remotePort: 50_000 },
  raw: { httpVersion: '1.1' },
  principal: { iss: 'https://idp.example.com', sub: 'alice', userKey: 'k'.repeat(32), scopes: new Set(['mcp']), exp: 0, claims: { sub: 'alice' } },
} as unknown as FastifyRequest;

/** One call as the route makes it: parse, scope, post, hold the answer (and read its event), end. */
async function call(b: McpBackend, shape: Shape, on: boolean, id: number): Promise<void> {
  const body = `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard"}}}`;
  const message = JSON.parse(body);
  (request as { body: unknown }).body = body;
  const scope = on ? telemetry.server(request, message, 'fast') : undefined;
  const headers: BackendCallHeaders = { sessionId: 'backend-session-1', protocolVersion: '2025-11-25', ...(scope?.headers ?? {}), caller: { principal: request.principal!, log: quiet, trace: scope } };
  const res = await b.post(body, headers);
  const held = await holdAnswer(res);
  if (shape === 'sse-one' && eventDataOf(held.whole!).length !== 1) throw new Error('not one event');
  scope?.end();
}

async function perCall(b: McpBackend, shape: Shape, on: boolean, calls: number): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < calls; i++) await call(b, shape, on, i);
  const used = process.cpuUsage(started);
  return (used.user + used.system) / calls;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

for (const shape of Object.keys(SHAPES) as Shape[]) {
  const plain = backend(shape);
  const faced = withClientSpans(backend(shape), telemetry);
  const setups = [
    { name: 'telemetry off', b: plain, on: false },
    { name: 'metrics only (sampling 0)', b: faced, on: true },
  ];
  for (const s of setups) await perCall(s.b, shape, s.on, 5_000);
  const cpu = setups.map(() => [] as number[]);
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < setups.length; k++) {
      const i = (k + r) % setups.length;
      cpu[i]!.push(await perCall(setups[i]!.b, shape, setups[i]!.on, CALLS));
    }
  }
  const added = median(cpu[1]!.map((us, r) => us - cpu[0]![r]!));
  console.log(`${shape.padEnd(8)} off ${median(cpu[0]!).toFixed(2)} µs/call, metrics only ${median(cpu[1]!).toFixed(2)} µs/call: +${added.toFixed(2)} µs (rounds ${cpu[1]!.map((us, r) => (us - cpu[0]![r]!).toFixed(1)).join(', ')})`);
}
await telemetry.shutdown();
