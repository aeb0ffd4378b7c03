/**
 * Writes one client-facing Server-Sent Events stream (MCP 2025-11-25 "Transports",
 * "Sending Messages to the Server" and "Resumability and Redelivery"): a priming event with
 * an id and `retry`, message events with ids unique per session and stream, and comment
 * keep-alives so that proxies and load balancers do not cut a quiet stream.
 */
import type { ServerResponse } from 'node:http';

export interface SseWriterOptions {
  keepAliveMs: number;
  headers: Record<string, string>;
}

export class SseWriter {
  readonly #res: ServerResponse;
  readonly #keepAlive: NodeJS.Timeout;
  #closed = false;
  readonly #onClose: Array<() => void> = [];

  constructor(res: ServerResponse, options: SseWriterOptions) {
    this.#res = res;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // Tells nginx-style proxies not to buffer the stream (see README, Ingress).
      'x-accel-buffering': 'no',
      ...options.headers,
    });
    res.flushHeaders();
    this.#keepAlive = setInterval(() => this.#write(': keep-alive\n\n'), options.keepAliveMs);
    this.#keepAlive.unref();
    res.on('close', () => this.#markClosed());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Registers a callback for when the client goes away or the stream is ended. */
  onClose(callback: () => void): void {
    if (this.#closed) callback();
    else this.#onClose.push(callback);
  }

  /** An event with an id and empty data: lets the client resume even before the first message. */
  prime(id: string, retryMs: number): void {
    this.#write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
  }

  /** One message event. Multi-line data is split into several `data:` lines as SSE requires. */
  message(data: string, id?: string, eventType?: string): void {
    let frame = '';
    if (eventType && eventType !== 'message') frame += `event: ${eventType}\n`;
    if (id) frame += `id: ${id}\n`;
    frame += data.includes('\n') ? data.split(/\r?\n/).map((line) => `data: ${line}\n`).join('') : `data: ${data}\n`;
    this.#write(`${frame}\n`);
  }

  /** Tells the client how long to wait before reconnecting (sent before a deliberate close). */
  retry(ms: number): void {
    this.#write(`retry: ${ms}\n\n`);
  }

  end(): void {
    if (this.#closed) return;
    this.#res.end();
    this.#markClosed();
  }

  #write(chunk: string): void {
    if (!this.#closed) this.#res.write(chunk);
  }

  #markClosed(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#keepAlive);
    for (const callback of this.#onClose.splice(0)) callback();
  }
}
