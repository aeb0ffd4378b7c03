/**
 * Writes one client-facing Server-Sent Events stream (MCP 2025-11-25 "Transports",
 * "Sending Messages to the Server" and "Resumability and Redelivery"): a priming event with
 * an id and `retry`, message events with ids unique per session and stream, and comment
 * keep-alives so that proxies and load balancers do not cut a quiet stream.
 *
 * Backpressure (issue 13): events are written as they come and never wait for the client,
 * so a client that stops reading would make the gateway buffer without limit. When events
 * (or a keep-alive) are due while more than `maxBufferedBytes` still wait in the response
 * and its socket (`writableLength`), the writer destroys the response instead: the socket's
 * buffers are freed, and the stream's owner learns of it through {@link SseWriter.onClose}
 * like any disconnect. The relay goes on keeping the stream's events in its replay log, so
 * the client resumes with Last-Event-ID (MCP 2025-11-25 "Resumability and Redelivery").
 * Nothing is sent first: a client that does not read would not see it.
 *
 * The test is made before a write, not after: one burst larger than the bound (a replay on
 * resumption, a large tool result) is written whole, and only a client still that far behind
 * when more is due is cut. Otherwise a result above the bound could never be delivered, not
 * even by resuming. So the gateway holds at most the bound plus one tick's events per
 * stream. The WebSocket path has the same default bound (websocket-bridge.ts).
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { formatSseEvent, formatSseRetry, SSE_KEEP_ALIVE, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import { addCallback, runCallbacks, type Callbacks } from './callbacks.js';
import { TimerWheel } from './timer-wheel.js';

/** `streams.maxBufferedBytes` by default: as the WebSocket path's bound for unread frames. */
export const DEFAULT_MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

export interface SseWriterOptions {
  keepAliveMs: number;
  /** Extra response headers (the session id, and whatever the route's hooks set, e.g. rate-limit headers). */
  headers: OutgoingHttpHeaders;
  /** Most bytes left unread by the client before the stream is ended (`streams.maxBufferedBytes`). */
  maxBufferedBytes?: number;
}

/**
 * The keep-alive wheels, one per `keepAliveMs` (one in a running gateway: `streams.keepAlive`):
 * every open stream of this process is on one, instead of holding a timer of its own (issue 29,
 * timer-wheel.ts).
 */
const keepAliveWheels = new Map<number, TimerWheel<SseWriter>>();

/** The wheel that sends the keep-alives of streams with this period (exported for tests: how many streams it holds). */
export function keepAliveWheel(keepAliveMs: number): TimerWheel<SseWriter> {
  let wheel = keepAliveWheels.get(keepAliveMs);
  if (!wheel) keepAliveWheels.set(keepAliveMs, (wheel = new TimerWheel<SseWriter>(keepAliveMs, (writer) => writer.keepAlive())));
  return wheel;
}

export class SseWriter {
  readonly #res: ServerResponse;
  readonly #keepAlive: TimerWheel<SseWriter>;
  #closed = false;
  /** Usually the relay's one callback (callbacks.ts). */
  #onClose: Callbacks;
  /** Events written in this tick, sent together (one socket write, not one per event). */
  #pending = '';
  #scheduled = false;
  readonly #maxBuffered: number;
  #overflowed = false;

  constructor(res: ServerResponse, options: SseWriterOptions) {
    this.#res = res;
    this.#maxBuffered = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    res.writeHead(200, { ...SSE_RESPONSE_HEADERS, connection: 'keep-alive', ...options.headers });
    flattenHead(res);
    // The headers go out with the first events, or on their own at the next tick if there are
    // none yet (a quiet GET stream must still be answered at once).
    this.#schedule();
    this.#keepAlive = keepAliveWheel(options.keepAliveMs);
    this.#keepAlive.add(this);
    res.on('close', () => this.#markClosed());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** True when the stream was ended because the client left more than `maxBufferedBytes` unread. */
  get overflowed(): boolean {
    return this.#overflowed;
  }

  /** Registers a callback for when the client goes away or the stream is ended. */
  onClose(callback: () => void): void {
    if (this.#closed) callback();
    else this.#onClose = addCallback(this.#onClose, callback);
  }

  /** An event with an id and empty data: lets the client resume even before the first message. */
  prime(id: string, retryMs: number): void {
    this.#write(formatSseEvent('', id, retryMs));
  }

  /** One message event (wire/sse.ts frames it: one `data:` line per line of `data`). */
  message(data: string, id?: string): void {
    this.#write(formatSseEvent(data, id));
  }

  /** A comment line that keeps proxies from cutting a quiet stream; the keep-alive wheel sends one every `keepAliveMs`. */
  keepAlive(): void {
    this.#write(SSE_KEEP_ALIVE);
  }

  /** Tells the client how long to wait before reconnecting (sent before a deliberate close). */
  retry(ms: number): void {
    this.#write(formatSseRetry(ms));
  }

  /**
   * Calls back once the response is over: `delivered` when all of it was handed to the
   * operating system (the response finished), false when the connection ended first.
   */
  onSettled(callback: (delivered: boolean) => void): void {
    whenSettled(this.#res, callback);
  }

  end(): void {
    if (this.#closed) return;
    // Not cut here even when the client is far behind: the end often comes a tick after a
    // large last answer, and a slow reader would then never get that answer, not even by
    // resuming. What the finished response leaves in the socket is bounded as below.
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
    if (this.#res.writableLength > this.#maxBuffered) return this.#overflow();
    const pending = this.#pending;
    this.#pending = '';
    if (pending) this.#res.write(pending);
    else if (!this.#res.headersSent) this.#res.flushHeaders();
    forgetSentHead(this.#res);
  }

  /** The client is more than `maxBufferedBytes` behind: free what waits for it and end the stream. */
  #overflow(): void {
    this.#overflowed = true;
    this.#pending = '';
    this.#res.destroy();
    this.#markClosed();
  }

  #markClosed(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#keepAlive.delete(this);
    // #closed is set: a callback added while these run is called at once, none is lost.
    this.#onClose = runCallbacks(this.#onClose);
  }
}

/**
 * Calls back, for a response just ended, whether it was delivered: true once all of it was
 * handed to the operating system, false when the client's connection ended first. Node's
 * `writableFinished` alone cannot tell: a response ended on a connection already gone reads as
 * finished, its socket detached. Also used for whole answers sent without a writer
 * (mcp/complete-stream.ts).
 */
export function whenSettled(res: ServerResponse, callback: (delivered: boolean) => void): void {
  if (res.destroyed) return callback(false);
  if (res.writableFinished) return callback(true);
  let finished = false;
  res.once('finish', () => (finished = true));
  res.once('close', () => callback(finished));
}

/**
 * Node builds a response's head by string concatenation and keeps it (`_header`) until the
 * response ends: for a stream that stays open, a tree of some 30 concatenated-string nodes,
 * about 1 KiB per idle stream (issue 29, bench/README.md "Memory per idle stream"). Reading a
 * character of it makes V8 flatten the tree in place into one string, which frees the nodes;
 * the value is unchanged, so where V8 does not do that nothing is lost but the saving.
 */
function flattenHead(res: ServerResponse): void {
  const head = (res as ServerResponse & { _header?: unknown })._header;
  if (typeof head === 'string') head.charCodeAt(0);
}

/** What a sent head is replaced with: any non-empty string reads as "headers sent". */
const SENT_HEAD = 'sent';

/**
 * Once the head has gone out with the first write (`_headerSent`), Node never reads its text
 * again: `_header` only has to stay a non-empty string, which is how `headersSent` and
 * `writeHead` tell that the head was sent. Kept, the flat head (status line, the SSE headers,
 * the session id, the rate-limit headers, the date) is about 370 bytes of every idle stream,
 * 3.7 MB with 10,000 (issue 45 §3, heap snapshots in bench/README.md); one shared string
 * stands in for it. Only when Node says the head was sent; otherwise nothing changes.
 */
function forgetSentHead(res: ServerResponse): void {
  const internals = res as ServerResponse & { _header?: unknown; _headerSent?: unknown };
  if (internals._headerSent === true && typeof internals._header === 'string' && internals._header !== SENT_HEAD) internals._header = SENT_HEAD;
}
