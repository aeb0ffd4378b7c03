/**
 * The server of the stdio phase (bench/stdio.ts, issue 44): the official SDK's McpServer with
 * one tool, `echo {message}` → its text. Every path of the phase runs this same file.
 *
 *   node --import tsx bench/stdio-echo.ts           on stdio (StdioServerTransport): the child
 *                                                   the gateway and the peers start
 *   node --import tsx bench/stdio-echo.ts --http    on Streamable HTTP (the SDK's server
 *                                                   transport, a session per initialize) on a
 *                                                   free port of 127.0.0.1, printed as
 *                                                   {"port":N}: the direct reference
 *
 * It exits when its stdin closes.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

function echoServer(): McpServer {
  const server = new McpServer({ name: 'bench-echo', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echoes its message', inputSchema: { message: z.string() } }, async ({ message }) => ({
    content: [{ type: 'text', text: message }],
  }));
  return server;
}

async function bodyOf(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
}

async function serveHttp(): Promise<void> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const server = createServer((req, res) => {
    void (async () => {
      const body = req.method === 'POST' ? await bodyOf(req) : undefined;
      const id = req.headers['mcp-session-id'];
      let transport = typeof id === 'string' ? sessions.get(id) : undefined;
      if (!transport) {
        const fresh = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (sid) => void sessions.set(sid, fresh) });
        await echoServer().connect(fresh);
        transport = fresh;
      }
      await transport.handleRequest(req, res, body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`));
}

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
if (process.argv.includes('--http')) await serveHttp();
else await echoServer().connect(new StdioServerTransport());
