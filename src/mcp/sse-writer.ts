/**
 * Writes one client-facing Server-Sent Events stream (MCP 2025-11-25 "Transports",
 * "Sending Messages to the Server" and "Resumability and Redelivery"): a priming event with
 * an id and `retry`, message events with ids unique per session and stream, and comment
 * keep-alives so that proxies and load balancers do not cut a quiet stream.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

export interface SseWriterOptions {
  keepAliveMs: number;
  /** Extra response headers (the session id, and whatever the route's hooks set, e.g. rate-limit headers). */
  headers: OutgoingHttpHeaders;
}

export class SseWriter {
  readonly #res: ServerResponse;
  readonly #keepAlive: NodeJS.Timeout;
  #closed = false;
  readonly #onClose: Array<() => void> = [];
  /** Events written in this tick, sent together (one socket write, not one per event). */
  #pending = '';
  #scheduled = false;

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
    // The headers go out with the first events, or on their own at the next tick if there are
    // none yet (a quiet GET stream must still be answered at once).
    this.#schedule();
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
    const pending = this.#pending;
    this.#pending = '';
    if (pending) this.#res.end(pending);
    else this.#res.end();
    this.#markClosed();
  }

  #write(chunk: string): void {
    if (this.#closed) return;
    this.#pending += chunk;
    this.#schedule();
  }

  /**
   * Coalesces the writes of one tick: an answer's events and the stream's end usually come
   * together, and each separate write is a system call (the largest item in the bench
   * profile). Plain buffering, not socket corking: a cork can outlive its response on a
   * keep-alive connection and stall the next one.
   */
  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    process.nextTick(() => this.#flush());
  }

  #flush(): void {
    this.#scheduled = false;
    if (this.#closed) return;
    const pending = this.#pending;
    this.#pending = '';
    if (pending) this.#res.write(pending);
    else if (!this.#res.headersSent) this.#res.flushHeaders();
  }

  #markClosed(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#keepAlive);
    for (const callback of this.#onClose.splice(0)) callback();
  }
}
