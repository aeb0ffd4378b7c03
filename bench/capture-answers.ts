/**
 * `node --import tsx bench/capture-answers.ts`: how real SDK servers put a `tools/call` answer
 * on the wire, so that bench/fast-backend.ts `--answer` sends exactly that (issue 29: "the
 * shapes come from what SDK servers (v1 and v2) actually send: check with a capture").
 *
 * Three servers, each on 127.0.0.1, each asked one `tools/call` over a raw socket (head and
 * body in one write, as the gateway's undici sends):
 *  - SDK v1 (`@modelcontextprotocol/sdk`) `StreamableHTTPServerTransport`, default mode, in a
 *    session (test/fixtures/sdk-sessions.ts);
 *  - the same tool with `progress` notifications sent before the result (two, then the result);
 *  - SDK v2 (`@modelcontextprotocol/server` 2.4.0) `createMcpHandler`, answering a 2025-11-25
 *    request statelessly (its `legacy: 'stateless'` serving) and a 2026-07-28 one, its web
 *    `Response` written to node:http as `toNodeHandler` does (test/fixtures/v2-node-handler.ts).
 * Printed for each: the status line and headers as received, then every socket read (its
 * offset in ms and length) and the chunked framing decoded (each chunk's size and text). A
 * read boundary is where the server's writes were a turn apart; on loopback this is stable.
 */
import net from 'node:net';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { McpServer as LegacyMcpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SdkSessions } from '../test/fixtures/sdk-sessions.js';
import { listenOnLoopback, readBody, serveEither } from '../test/fixtures/v2-node-handler.js';

const CALL = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hello, switchboard' } } };

function legacyServer(): LegacyMcpServer {
  const server = new LegacyMcpServer({ name: 'capture-v1', version: '1.0.0' });
  server.registerTool('echo', { description: 'echo' }, async () => ({ content: [{ type: 'text', text: '{"message":"hello, switchboard"}' }] }));
  server.registerTool('progress', { description: 'two progress notifications, then the result' }, async (extra) => {
    for (const progress of [1, 2]) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: 0, progress, total: 2 } });
    return { content: [{ type: 'text', text: '{"message":"hello, switchboard"}' }] };
  });
  return server;
}

function modernServer(): McpServer {
  const server = new McpServer({ name: 'capture-v2', version: '1.0.0' });
  server.registerTool('echo', { description: 'echo' }, async () => ({ content: [{ type: 'text', text: '{"message":"hello, switchboard"}' }] }));
  return server;
}

interface Read {
  atMs: number;
  bytes: Buffer;
}

/** One request over a fresh socket; resolves with every read once the answer ended (or 2 s passed). */
function exchange(port: number, headers: Record<string, string>, body: string): Promise<Read[]> {
  const head = [`POST /mcp HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Length: ${Buffer.byteLength(body)}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n');
  return new Promise((resolve, reject) => {
    const reads: Read[] = [];
    const socket = net.connect(port, '127.0.0.1');
    const t0 = performance.now();
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reads);
    };
    const timer = setTimeout(done, 2000);
    socket.on('data', (bytes: Buffer) => {
      reads.push({ atMs: performance.now() - t0, bytes });
      const all = Buffer.concat(reads.map((r) => r.bytes)).toString('latin1');
      // The end of a chunked body, or of a body with a length.
      const length = /\r\ncontent-length: (\d+)\r\n/i.exec(all);
      const headEnd = all.indexOf('\r\n\r\n');
      if (all.endsWith('\r\n0\r\n\r\n') || (length && headEnd >= 0 && all.length - headEnd - 4 >= Number(length[1]))) done();
    });
    socket.on('error', reject);
    socket.write(head + body);
  });
}

/** The status line and headers, every read, and the chunked framing decoded. */
function describe(title: string, reads: Read[]): string {
  const all = Buffer.concat(reads.map((r) => r.bytes)).toString('utf8');
  const headEnd = all.indexOf('\r\n\r\n');
  const lines = [`== ${title}`, ...all.slice(0, headEnd).split('\r\n').map((l) => `   ${l}`), `   -- ${reads.length} socket read(s):`];
  for (const r of reads) lines.push(`   +${r.atMs.toFixed(2)} ms  ${r.bytes.length} bytes  ${JSON.stringify(r.bytes.toString('utf8').slice(0, 60))}${r.bytes.length > 60 ? '…' : ''}`);
  if (/transfer-encoding: chunked/i.test(all.slice(0, headEnd))) {
    lines.push('   -- chunks:');
    let rest = all.slice(headEnd + 4);
    while (rest.length) {
      const eol = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, eol), 16);
      lines.push(`   ${size} bytes${size ? `: ${JSON.stringify(rest.slice(eol + 2, eol + 2 + size))}` : ' (the end)'}`);
      if (!size) break;
      rest = rest.slice(eol + 2 + size + 2);
    }
  } else lines.push(`   -- body: ${JSON.stringify(all.slice(headEnd + 4))}`);
  return lines.join('\n');
}

const BASE = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };

async function captureV1(): Promise<string[]> {
  const sessions = new SdkSessions(legacyServer);
  const server = await listenOnLoopback(async (req, res) => {
    const body = await readBody(req);
    await sessions.handle(req, res, body ? (JSON.parse(body.toString('utf8')) as unknown) : undefined);
  });
  const port = (server.address() as net.AddressInfo).port;
  try {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'capture', version: '1' } } };
    const initReads = await exchange(port, { ...BASE, 'MCP-Protocol-Version': '2025-11-25' }, JSON.stringify(init));
    const session = /\r\nmcp-session-id: ([^\r]+)\r\n/i.exec(Buffer.concat(initReads.map((r) => r.bytes)).toString('latin1'))![1]!;
    const headers = { ...BASE, 'MCP-Protocol-Version': '2025-11-25', 'Mcp-Session-Id': session };
    await exchange(port, headers, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const call = await exchange(port, headers, JSON.stringify(CALL));
    const progress = await exchange(port, headers, JSON.stringify({ ...CALL, params: { name: 'progress', arguments: {}, _meta: { progressToken: 0 } } }));
    return [describe('SDK v1 1.32.2 StreamableHTTPServerTransport (default), tools/call', call), describe('SDK v1, tools/call with two progress notifications', progress)];
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

async function captureV2(): Promise<string[]> {
  const handler = createMcpHandler(modernServer, { legacy: 'stateless' });
  const server = await listenOnLoopback(async (req, res) => serveEither(req, res, await readBody(req), handler, new SdkSessions(legacyServer)));
  const port = (server.address() as net.AddressInfo).port;
  try {
    const legacy = await exchange(port, { ...BASE, 'MCP-Protocol-Version': '2025-11-25' }, JSON.stringify(CALL));
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'capture', version: '1' } };
    const modernHeaders = { ...BASE, 'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' };
    const modern = await exchange(port, modernHeaders, JSON.stringify({ ...CALL, params: { ...CALL.params, _meta: meta } }));
    return [describe('SDK v2 2.4.0 createMcpHandler, a 2025-11-25 tools/call (stateless legacy serving)', legacy), describe('SDK v2 2.4.0 createMcpHandler, a 2026-07-28 tools/call', modern)];
  } finally {
    server.closeAllConnections();
    server.close();
    await handler.close();
  }
}

const out = [...(await captureV1()), ...(await captureV2())];
process.stdout.write(`${out.join('\n\n')}\n`);
process.exit(0);
