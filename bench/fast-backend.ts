/**
 * A deliberately minimal MCP backend for the benchmark, on raw `node:http` (no framework,
 * no SDK): the bench measures the gateway, so the backend must cost as little as possible.
 *
 * Run: `node --import tsx bench/fast-backend.ts [--sse] [--split] [--port N]`
 *   POST initialize               → 200 application/json, a fresh `Mcp-Session-Id`
 *   POST notifications (no id)    → 202
 *   POST tools/call               → echo of the arguments; application/json, or with `--sse`
 *                                   a one-event text/event-stream
 *   POST any other request        → empty result
 *   POST with an unknown session  → 404
 *   POST with `MCP-Protocol-Version: 2026-07-28` → served without a session, as a backend of
 *                                   that revision (the result carries `resultType`); the bench
 *                                   reaches it so through a backend entry pinned to 2026-07-28
 *   with `--answer <shape>`       → tools/call answered in the shape of a real SDK server,
 *                                   byte for byte as captured (bench/README.md, "Answer shapes"):
 *                                   `chunked` JSON without a length (a v2 SDK server's web
 *                                   `Response`), `sse-one` (SDK v1 default: one event, chunked),
 *                                   `sse-progress` (two progress events, then the result)
 *   with `--split`                → every answer's head and body in two writes (`flushHeaders`),
 *                                   as a backend that streams its answer sends them; the
 *                                   gateway then reads twice per answer (bench/wire-shapes.ts)
 *   GET                           → 405 (no standalone stream; the gateway keeps its own)
 *   DELETE                        → 200, session forgotten
 *
 * Prints one JSON line `{"port":N}` when listening; exits when stdin ends (parent gone) or
 * on SIGTERM.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

const args = process.argv.slice(2);
const sse = args.includes('--sse');
const split = args.includes('--split');
const answerArg = args.indexOf('--answer');
const answerShape = answerArg >= 0 ? args[answerArg + 1] : undefined;
if (answerShape !== undefined && !['chunked', 'sse-one', 'sse-progress'].includes(answerShape)) throw new Error(`--answer must be chunked, sse-one or sse-progress (got ${answerShape})`);
const portArg = args.indexOf('--port');
const port = portArg >= 0 ? Number(args[portArg + 1]) : 0;
const SUPPORTED = new Set(['2025-11-25', '2025-06-18', '2025-03-26']);

const sessions = new Set<string>();

interface Message {
  jsonrpc?: string;
  id?: string | number | null;
  method?: string;
  params?: { protocolVersion?: string; arguments?: unknown };
}

function reply(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  send(res, body);
}

/** The body after the head: with `--split` in a write of its own. */
function send(res: ServerResponse, body: string): void {
  if (split) res.flushHeaders();
  res.end(body);
}

function handlePost(req: IncomingMessage, res: ServerResponse, text: string): void {
  let msg: Message;
  try {
    msg = JSON.parse(text) as Message;
  } catch {
    return reply(res, 400, '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
  }
  if (Array.isArray(msg)) return reply(res, 400, '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batches not supported"}}');
  if (msg.method === 'initialize') {
    const id = randomUUID();
    sessions.add(id);
    const asked = msg.params?.protocolVersion;
    const result = {
      protocolVersion: asked && SUPPORTED.has(asked) ? asked : '2025-11-25',
      capabilities: { tools: {} },
      serverInfo: { name: 'bench-fast-backend', version: '1.0.0' },
    };
    return reply(res, 200, JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }), { 'mcp-session-id': id });
  }
  const stateless = req.headers['mcp-protocol-version'] === '2026-07-28';
  const session = req.headers['mcp-session-id'];
  if (!stateless && (typeof session !== 'string' || !sessions.has(session))) {
    return reply(res, 404, '{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}');
  }
  if (msg.id === undefined || msg.id === null) {
    res.writeHead(202, { 'content-length': 0 });
    res.end();
    return;
  }
  const content = msg.method === 'tools/call' ? { content: [{ type: 'text', text: JSON.stringify(msg.params?.arguments ?? null) }] } : {};
  const result = stateless ? { resultType: 'complete', ...content } : content;
  const body = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result });
  if (answerShape && msg.method === 'tools/call') return answerShaped(res, answerShape, msg.id, content);
  if (sse && msg.method === 'tools/call') {
    const frame = `event: message\ndata: ${body}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'content-length': Buffer.byteLength(frame) });
    send(res, frame);
    return;
  }
  reply(res, 200, body);
}

/** The SSE head SDK v1's StreamableHTTPServerTransport writes (captured; no length: chunked). */
const SDK_SSE_HEAD = { 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'content-type': 'text/event-stream', 'x-accel-buffering': 'no' };

/** The v2 SDK's result carries its server's name in `_meta` (captured from `createMcpHandler` 2.4.0). */
const V2_META = { 'io.modelcontextprotocol/serverInfo': { name: 'bench-fast-backend', version: '1.0.0' } };

/**
 * A tools/call answer as real SDK servers write it (bench/capture-answers.ts prints the capture;
 * bench/README.md, "Answer shapes"): head, one chunk per message, then the end, all in one turn.
 * Both SDKs serialize `result` before `jsonrpc` and `id`; v2 adds `resultType` and `_meta`.
 */
function answerShaped(res: ServerResponse, shape: string, id: string | number, content: object): void {
  if (shape === 'chunked') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(JSON.stringify({ result: { ...content, resultType: 'complete', _meta: V2_META }, jsonrpc: '2.0', id }));
    res.end();
    return;
  }
  res.writeHead(200, SDK_SSE_HEAD);
  if (shape === 'sse-progress') {
    for (const progress of [1, 2]) res.write(`event: message\ndata: {"method":"notifications/progress","params":{"progressToken":0,"progress":${progress},"total":2},"jsonrpc":"2.0"}\n\n`);
  }
  res.write(`event: message\ndata: ${JSON.stringify({ result: content, jsonrpc: '2.0', id })}\n\n`);
  res.end();
}

const server = createServer((req, res) => {
  if (req.method === 'POST') {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handlePost(req, res, chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    return;
  }
  if (req.method === 'DELETE') {
    const session = req.headers['mcp-session-id'];
    if (typeof session === 'string') sessions.delete(session);
    res.writeHead(200, { 'content-length': 0 });
    res.end();
    return;
  }
  // GET: no standalone stream here. Drain anything sent and say so.
  req.resume();
  res.writeHead(405, { allow: 'POST, DELETE', 'content-length': 0 });
  res.end();
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 125_000;
server.requestTimeout = 0;

server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : port, sse, answer: answerShape })}\n`);
});

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
if (!process.stdin.isTTY) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}
