/**
 * HTTP requests from the gateway to its own Streamable HTTP endpoint over loopback, used by
 * the WebSocket bridge (websocket-bridge.ts explains why it goes round through HTTP).
 *
 * The address is read from the listening server (`server.address()`) at the first request,
 * so it works with any configured port, including 0: a wildcard address (0.0.0.0, ::)
 * becomes the loopback address of its family, a Unix socket path is dialled as such.
 * One keep-alive undici Agent is shared by all bridges; it is closed with the app.
 * No timeouts of its own: the gateway already bounds every backend call, SSE streams are
 * long-lived by design, and everything a bridge started is aborted when its socket closes.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';

export interface LoopbackTarget {
  /** `http://127.0.0.1:8080`, `http://[::1]:8080`; `http://localhost` for a Unix socket. */
  origin: string;
  socketPath?: string;
}

export type LoopbackResponse = Dispatcher.ResponseData;

/** Where to reach a server listening on `address` from the same host. */
export function loopbackTarget(address: string | AddressInfo | null): LoopbackTarget {
  if (!address) throw new Error('the server is not listening, so it cannot be reached over loopback');
  if (typeof address === 'string') return { origin: 'http://localhost', socketPath: address };
  let host = address.address;
  if (host === '0.0.0.0') host = '127.0.0.1';
  else if (host === '::' || host === '::0') host = '::1';
  return { origin: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}` };
}

export class Loopback {
  readonly #server: Server;
  #target: LoopbackTarget | undefined;
  #agent: Agent | undefined;
  #closed = false;

  constructor(server: Server) {
    this.#server = server;
  }

  /** One request to `path` on this server; the caller reads or dumps the body. */
  async request(method: 'GET' | 'POST' | 'DELETE', path: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal): Promise<LoopbackResponse> {
    if (this.#closed) throw new Error('loopback client closed');
    const target = (this.#target ??= loopbackTarget(this.#server.address()));
    this.#agent ??= new Agent({
      keepAliveTimeout: 30_000,
      headersTimeout: 0,
      bodyTimeout: 0,
      ...(target.socketPath ? { connect: { socketPath: target.socketPath } } : {}),
    });
    return request(`${target.origin}${path}`, { method, headers, body, signal, dispatcher: this.#agent });
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#agent?.close().catch(() => {});
  }
}
