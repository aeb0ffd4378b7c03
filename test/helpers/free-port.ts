/**
 * Picks a TCP port that is free on the loopback interface right now.
 *
 * Why: some programs we start for tests (server-everything, redis-server)
 * cannot report the port they bound when asked for port 0, so the test
 * harness has to choose one up front. The OS hands out an unused ephemeral
 * port when we listen on port 0; we read it and release it immediately.
 *
 * Caveat (inherent to the technique): another process could take the port
 * between this call and the child binding it. With ephemeral ports that is
 * rare; helpers surface it as a clear "not ready / exited" error.
 */
import { createServer } from 'node:net';

/** Resolves with a port that was free on 127.0.0.1 at the time of the call. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`freePort: unexpected server address ${String(address)}`));
        return;
      }
      const { port } = address;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}
