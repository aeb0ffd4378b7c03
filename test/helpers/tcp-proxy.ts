/**
 * A TCP proxy on 127.0.0.1 in front of a local server (Redis, in the state tests), whose
 * connections a test can tap: each gets its own taps, which decide what is passed on, held
 * back or cut. Both sockets of a connection close together.
 */
import { createServer, Socket, type Server } from 'node:net';

export interface ProxyConnection {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Closes both sides. */
  close(): void;
}

/** What one connection does with each chunk; a tap left out passes chunks on unchanged. */
export interface ConnectionTaps {
  fromClient?(chunk: Buffer, connection: ProxyConnection): void;
  fromUpstream?(chunk: Buffer, connection: ProxyConnection): void;
}

export interface TcpProxy {
  port: number;
  /** Closes every connection through the proxy now; clients may connect again. */
  cutAll(): void;
  close(): Promise<void>;
}

/** `tapsFor` is called once per accepted connection. */
export async function startTcpProxy(targetPort: number, tapsFor: () => ConnectionTaps = () => ({})): Promise<TcpProxy> {
  const open = new Set<ProxyConnection>();
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const connection: ProxyConnection = {
      client,
      upstream,
      close: () => {
        client.destroy();
        upstream.destroy();
        open.delete(connection);
      },
    };
    open.add(connection);
    const taps = tapsFor();
    upstream.connect(targetPort, '127.0.0.1');
    client.on('data', (chunk: Buffer) => (taps.fromClient ? taps.fromClient(chunk, connection) : upstream.write(chunk)));
    upstream.on('data', (chunk: Buffer) => (taps.fromUpstream ? taps.fromUpstream(chunk, connection) : client.write(chunk)));
    client.on('close', connection.close).on('error', connection.close);
    upstream.on('close', connection.close).on('error', connection.close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cutAll = () => {
    for (const connection of [...open]) connection.close();
  };
  return {
    port: (server.address() as { port: number }).port,
    cutAll,
    close: async () => {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
