/**
 * Connections that hold a closing server open (SPEC §5, graceful shutdown). Node's
 * `server.close()` ends the connections idle at that moment and then waits for the others. A
 * connection whose last response ended after that — a stream the drain just stopped, a call
 * that finished answering — or whose client left a request unfinished (an aborted upload: the
 * HTTP parser still counts it as busy, so `closeIdleConnections()` skips it) would then hold the
 * close for the whole keep-alive timeout (72 s), or for ever. Found as a test whose gateway took
 * 70 s to close after a cancelled call (test/policy/audit-cancelled.test.ts).
 *
 * While the server closes, a connection with no response in progress is destroyed; one whose
 * response is still being written is left to finish (the drain's deadline bounds those), and an
 * upgraded one (a WebSocket) to the transport that owns it.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** How often, while closing, connections that went quiet are looked for. */
const EVERY_MS = 100;

/** The response a socket is writing (Node's own `closeIdleConnections` reads the same field). */
type HttpSocket = Socket & { _httpMessage?: { writableFinished?: boolean } | null };

/** Tracks the server's connections; `closing()` starts ending the quiet ones, and returns how to stop. */
export function trackConnections(server: Server): { closing(): () => void } {
  const sockets = new Set<HttpSocket>();
  // One listener for every socket (an emitter calls it with the socket as `this`): a closure
  // and a once-wrapper per connection were about 0.2 KiB of every idle stream (issue 45 §3).
  // A socket closes once, so `on` is as good as `once` here.
  function forget(this: HttpSocket): void {
    sockets.delete(this);
  }
  server.on('connection', (socket: HttpSocket) => {
    sockets.add(socket);
    socket.on('close', forget);
  });
  // An upgraded connection is no longer HTTP: the WebSocket transport closes it (1001, transport/).
  server.on('upgrade', (_request, socket: HttpSocket) => sockets.delete(socket));
  const endQuiet = () => {
    for (const socket of sockets) if (!socket._httpMessage || socket._httpMessage.writableFinished) socket.destroy();
  };
  return {
    closing() {
      endQuiet();
      const timer = setInterval(endQuiet, EVERY_MS).unref();
      return () => clearInterval(timer);
    },
  };
}
