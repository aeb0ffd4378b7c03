/**
 * The reference the issue measures the gateway against: a naive Fastify + undici
 * pass-through with no auth, no sessions of its own, no Redis, no metrics. It forwards
 * `POST /mcp/{anything}` to one backend with the client's MCP headers and pipes the answer
 * back. Measured on the same machine in the same run as the gateway, it shows how much of
 * the gateway's cost is the Node HTTP stack itself and how much is the gateway's own work.
 *
 * Run: `node --import tsx bench/naive-proxy.ts --backend http://127.0.0.1:N/mcp`
 * Prints one JSON line `{"port":N}` when listening; exits when stdin ends or on SIGTERM.
 * Not part of the product.
 */
import Fastify from 'fastify';
import { Agent, request } from 'undici';

const args = process.argv.slice(2);
const backendArg = args.indexOf('--backend');
if (backendArg < 0) throw new Error('--backend <url> is required');
const backend = new URL(args[backendArg + 1]!);
const agent = new Agent({ keepAliveTimeout: 30_000 });
const FORWARDED = ['accept', 'content-type', 'mcp-session-id', 'mcp-protocol-version'] as const;

const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));
app.post('/mcp/:backend', async (req, reply) => {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  const res = await request(backend, { method: 'POST', headers, body: req.body as string, dispatcher: agent });
  const contentType = res.headers['content-type'];
  if (typeof contentType === 'string') reply.header('content-type', contentType);
  const session = res.headers['mcp-session-id'];
  if (typeof session === 'string') reply.header('mcp-session-id', session);
  return reply.code(res.statusCode).send(res.body);
});

await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
const stop = () => void app.close().finally(() => process.exit(0));
process.stdin.on('end', stop).resume();
process.on('SIGTERM', stop);
