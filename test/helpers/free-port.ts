/**
 * Picks a TCP port that is free on the loopback interface right now.
 *
 * Why: some programs we start for tests (server-everything, redis-server)
 * cannot report the port they bound when asked for port 0, so the test
 * harness has to choose one up front.
 *
 * Caveat (inherent to the technique): another process could take the port
 * between this call and the child binding it. So the port is drawn at random
 * from below the kernel's ephemeral range (ip_local_port_range, 32768 and up
 * on Linux): there, no outgoing connection of any process (a test's fetch, a
 * gateway's Redis client) is ever given it in the meantime, and two test
 * files picking at once (TEST_CONCURRENCY, issue 43) meet one time in
 * thousands, not whenever the kernel hands out neighbouring ports. A port
 * that is taken is skipped; after 50 taken draws, the kernel picks (port 0).
 */
import { createServer } from 'node:net';

/** Below Linux's default ephemeral range (32768–60999) and above the registered services tests meet. */
const LOW = 20_000;
const HIGH = 32_000;
const DRAWS = 50;

/** Resolves with a port that was free on 127.0.0.1 at the time of the call. */
export async function freePort(): Promise<number> {
  for (let draw = 0; draw < DRAWS; draw++) {
    const port = await tryPort(LOW + Math.floor(Math.random() * (HIGH - LOW)));
    if (port !== undefined) return port;
  }
  const port = await tryPort(0);
  if (port === undefined) throw new Error('freePort: the kernel had no free port on 127.0.0.1');
  return port;
}

/** Listens on `port` (0: any) and lets it go again: the port, or undefined when it is taken. */
function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(undefined) : reject(err)));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`freePort: unexpected server address ${String(address)}`));
        return;
      }
      const bound = address.port;
      server.close((err) => (err ? reject(err) : resolve(bound)));
    });
  });
}
