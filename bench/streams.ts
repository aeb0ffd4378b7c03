/**
 * Idle standalone SSE streams (`GET /mcp/{backend}`, `Accept: text/event-stream`), opened
 * over raw TCP sockets so that holding thousands of them costs the bench process only a
 * socket each. A stream counts as open once the gateway's `HTTP/1.1 200` status line and
 * headers have arrived; after that everything it sends (priming event, keep-alives) is
 * read and dropped.
 */
import { connect, type Socket } from 'node:net';

export interface StreamRequest {
  host: string;
  port: number;
  path: string;
  headers: Record<string, string>;
}

export interface OpenedStreams {
  sockets: Socket[];
  failures: number;
  firstError?: string;
}

const OPEN_TIMEOUT_MS = 15_000;

function openOne(req: StreamRequest): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: req.host, port: req.port });
    socket.setNoDelay(true);
    let head = '';
    const timer = setTimeout(() => fail(new Error(`no answer within ${OPEN_TIMEOUT_MS} ms`)), OPEN_TIMEOUT_MS);
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.on('error', fail);
    socket.once('connect', () => {
      const lines = [`GET ${req.path} HTTP/1.1`, `Host: ${req.host}:${req.port}`];
      for (const [k, v] of Object.entries(req.headers)) lines.push(`${k}: ${v}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16_384) fail(new Error('response headers too long'));
        return;
      }
      clearTimeout(timer);
      const status = head.slice(0, head.indexOf('\r\n'));
      if (!/^HTTP\/1\.1 200 /.test(status)) return fail(new Error(`stream refused: ${status}; ${head.slice(end + 4, end + 300)}`));
      socket.off('data', onData);
      socket.off('error', fail);
      socket.on('data', () => {});
      socket.on('error', () => {});
      resolve(socket);
    };
    socket.on('data', onData);
  });
}

/** Opens one stream per request, `concurrency` at a time. */
export async function openIdleStreams(requests: StreamRequest[], concurrency: number): Promise<OpenedStreams> {
  const sockets: Socket[] = [];
  let failures = 0;
  let firstError: string | undefined;
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const req = requests[next++]!;
      try {
        sockets.push(await openOne(req));
      } catch (err) {
        failures++;
        firstError ??= (err as Error).message;
        // A refused stream usually means a resource ran out (file descriptors): stop early.
        if (failures > 50) return;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { sockets, failures, firstError };
}

export function closeAll(sockets: Socket[]): void {
  for (const s of sockets) s.destroy();
}
