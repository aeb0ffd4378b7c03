/**
 * An MCP client transport over WebSocket for tests: what the SDK's WebSocketClientTransport
 * speaks on the wire (subprotocol `mcp`, one JSON.stringify'd message per text frame, frames
 * parsed with JSONRPCMessageSchema), over the `ws` package, which can set headers on the
 * upgrade request (the global WebSocket the SDK uses cannot send an Authorization header)
 * and bind the client socket to a chosen local address.
 */
import WebSocket, { type ClientOptions } from 'ws';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The SDK transport's wire behaviour, over `ws` so that the upgrade can carry headers. */
export class WsTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Every text frame received, raw, in order (for asserting error frames). */
  readonly frames: string[] = [];
  closeCode: number | undefined;
  closeReason = '';
  #socket: WebSocket | undefined;

  constructor(
    readonly url: string,
    readonly headers: Record<string, string>,
    /** `localAddress`: the client socket's own address (any of 127/8 reaches a loopback listener on Linux). */
    readonly options: Pick<ClientOptions, 'localAddress'> = {},
  ) {}

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(this.url, 'mcp', { ...this.options, headers: this.headers });
      this.#socket = socket;
      socket.once('open', () => resolve());
      socket.once('unexpected-response', (_req, res) => reject(new Error(`handshake refused: HTTP ${res.statusCode}`)));
      socket.on('error', (err) => {
        reject(err);
        this.onerror?.(err);
      });
      socket.on('close', (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        this.onclose?.();
      });
      socket.on('message', (data, isBinary) => {
        const text = isBinary ? '' : data.toString();
        this.frames.push(text);
        // A WHATWG WebSocket (what the SDK transport uses) fires each message event as its own
        // task; `ws` emits all frames of one TCP read in one go. Deliver one per task, as the
        // SDK transport would see them: its Protocol handles notifications a microtask later
        // than responses, so a progress notification directly followed by the result would
        // otherwise reach the client after the result.
        setImmediate(() => {
          let message: JSONRPCMessage;
          try {
            message = JSONRPCMessageSchema.parse(JSON.parse(text));
          } catch (error) {
            this.onerror?.(error as Error);
            return;
          }
          this.onmessage?.(message);
        });
      });
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.#socket) throw new Error('Not connected');
    this.#socket.send(JSON.stringify(message));
  }

  /** A frame the SDK would never send (invalid JSON, binary …). */
  sendRaw(data: string | Buffer, binary = false): void {
    this.#socket!.send(data, { binary });
  }

  async close(): Promise<void> {
    this.#socket?.close();
  }

  /** Resolves once the socket is closed. */
  closed(): Promise<void> {
    const socket = this.#socket;
    if (!socket || socket.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => socket.once('close', () => resolve()));
  }
}
