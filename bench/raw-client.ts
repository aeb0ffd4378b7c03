/**
 * A third way of sending, for bench/wire-shapes.ts (issue 16, finding 2): HTTP/1.1 over a
 * raw `net` socket, keep-alive, one request in flight per connection, with the request's
 * head and body in one write or (`split`) in two writes a turn of the event loop apart, as a
 * client that writes its headers before its body does. Reads answers with a minimal parser
 * (Content-Length or chunked). Not a general client: just enough to tell what the way of
 * sending costs the server.
 */
import { connect, type Socket } from 'node:net';
import { callBody, Recorder, type LoopResult, type Path } from './load.js';

let nextId = 2_000_000_000;
const HEAD_END = Buffer.from('\r\n\r\n');
const CHUNKED_END = Buffer.from('\r\n0\r\n\r\n');

/** Resolves with the body of the next answer on `socket`, or rejects on an error or EOF. */
function readAnswer(socket: Socket): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    const done = (err?: Error, answer?: { status: number; body: string }) => {
      socket.off('data', onData).off('error', done).off('end', onEnd);
      if (err) reject(err);
      else resolve(answer!);
    };
    const onEnd = () => done(new Error('connection closed'));
    const onData = (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const headEnd = buf.indexOf(HEAD_END);
      if (headEnd < 0) return;
      const head = buf.subarray(0, headEnd).toString('latin1');
      const status = Number(head.slice(9, 12));
      const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const body = buf.subarray(headEnd + 4);
      if (length ? body.length >= Number(length[1]) : body.subarray(-CHUNKED_END.length).equals(CHUNKED_END)) done(undefined, { status, body: body.toString('utf8') });
    };
    socket.on('data', onData).on('error', done).on('end', onEnd);
  });
}

/** Closed loop of `connections` raw keep-alive connections for `durationMs`. */
export async function rawLoop(p: Path, connections: number, durationMs: number, split: boolean): Promise<LoopResult> {
  const { hostname, port } = new URL(p.origin);
  const headLines = Object.entries(p.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const rec = new Recorder(65_536);
  const start = performance.now();
  const deadline = start + durationMs;
  const worker = async () => {
    const socket = connect(Number(port), hostname).setNoDelay(true);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    try {
      while (performance.now() < deadline) {
        const body = Buffer.from(callBody(nextId++));
        const head = `POST ${p.path} HTTP/1.1\r\nhost: ${hostname}:${port}\r\n${headLines}content-length: ${body.length}\r\n\r\n`;
        const t0 = performance.now();
        const answer = readAnswer(socket);
        if (split) {
          socket.write(head, 'latin1');
          await new Promise((r) => setImmediate(r));
          socket.write(body);
        } else socket.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));
        const { status, body: text } = await answer;
        if (status === 200 && text.includes('"result"')) rec.add(performance.now() - t0);
        else rec.fail(new Error(`answer was HTTP ${status} without a result`));
      }
    } catch (err) {
      rec.fail(err);
    } finally {
      socket.destroy();
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return { calls: rec.n, errors: rec.errors, elapsedMs: performance.now() - start, latencies: rec.latencies.subarray(0, rec.n), firstError: rec.firstError };
}
