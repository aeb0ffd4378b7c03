/**
 * The collector of the governance phase (bench/governance.ts): a real OTLP/HTTP receiver on
 * raw `node:http` that takes `POST /v1/traces`, `/v1/metrics` and `/v1/logs`, reads each body
 * whole and answers with the (empty) export response, as a collector does — but keeps nothing
 * of it, so a long run at thousands of spans a second costs it no memory (the test receiver,
 * test/fixtures/otlp-receiver.ts, decodes and keeps every span). `GET /counts` gives the
 * requests and bytes received by path, so the bench can say the spans did arrive.
 *
 * Run: `node --import tsx bench/otlp-sink.ts`; prints `{"port":N}` when listening; exits when
 * stdin ends (parent gone) or on SIGTERM.
 */
import { createServer } from 'node:http';

const counts: Record<string, { requests: number; bytes: number }> = {};

const server = createServer((req, res) => {
  const path = (req.url ?? '').split('?')[0]!;
  if (req.method === 'GET' && path === '/counts') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(counts));
    return;
  }
  let bytes = 0;
  req.on('data', (c: Buffer) => (bytes += c.length));
  req.on('end', () => {
    const seen = (counts[path] ??= { requests: 0, bytes: 0 });
    seen.requests++;
    seen.bytes += bytes;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.keepAliveTimeout = 120_000;

// Ends with the bench: on SIGTERM, or when its stdin (the parent's pipe) closes.
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.stdin.on('end', stop).resume();
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`));
