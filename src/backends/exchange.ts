/**
 * One HTTP exchange with a backend through undici's dispatcher, with a body that is just a
 * queue of chunks.
 *
 * Why not `undici.request`: it wraps every response in a Node Readable inside an
 * AsyncResource, and the gateway then reads that stream chunk by chunk — for a one-message
 * answer that machinery cost more CPU than the message itself (bench/README.md, "Profile").
 * The handler here gets undici's callbacks directly: headers resolve the response, chunks
 * land in {@link ExchangeBody}, which hands them to one consumer (an async iteration,
 * `bytes()`/`text()`, or `dump()`). Flow control is kept: past {@link HIGH_WATER_BYTES}
 * unread, the socket is paused until the consumer catches up.
 */
import { util, type Dispatcher } from 'undici';
import type { BackendBody } from './body.js';

/** Unread bytes at which the backend's socket is paused. */
const HIGH_WATER_BYTES = 64 * 1024;
/** `dump()` reads at most this much of an unfinished body before closing the connection instead. */
const DUMP_LIMIT_BYTES = 128 * 1024;

export interface ExchangeOptions {
  origin: string;
  path: string;
  method: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  /** A message's text; bytes for an OTLP export (telemetry/otlp-undici-transport.ts). */
  body?: string | Uint8Array;
  headersTimeout: number;
  bodyTimeout: number;
  signal?: AbortSignal;
}

export interface ExchangeResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: ExchangeBody;
}

type Abort = (reason?: Error) => void;

/** Sends one request; resolves at the response headers, rejects when none arrive. */
export function exchange(dispatcher: Dispatcher, options: ExchangeOptions): Promise<ExchangeResponse> {
  return new Promise((resolve, reject) => {
    const { signal } = options;
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    dispatcher.dispatch(
      { origin: options.origin, path: options.path, method: options.method, headers: options.headers, body: options.body, headersTimeout: options.headersTimeout, bodyTimeout: options.bodyTimeout },
      new ExchangeHandler(signal, resolve, reject),
    );
  });
}

/**
 * undici's callbacks for one exchange: the response resolves at its headers, then its body is
 * fed chunk by chunk; an abort of `signal` ends whichever is pending. One object per exchange
 * rather than a closure per callback (issue 29).
 */
class ExchangeHandler implements Dispatcher.DispatchHandler {
  #abort: Abort | undefined;
  #body: ExchangeBody | undefined;
  #settled = false;
  readonly #onAbort: (() => void) | undefined;

  constructor(
    private readonly signal: AbortSignal | undefined,
    private readonly resolve: (response: ExchangeResponse) => void,
    private readonly reject: (err: Error) => void,
  ) {
    if (!signal) return;
    this.#onAbort = () => this.#aborted(signal);
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  onConnect(abortRequest: Abort): void {
    this.#abort = abortRequest;
    if (this.signal?.aborted) abortRequest(abortReason(this.signal));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    const body = (this.#body = new ExchangeBody(resume, (reason) => this.#abort?.(reason)));
    this.#settled = true;
    this.resolve({ status: statusCode, headers: util.parseHeaders(rawHeaders) as ExchangeResponse['headers'], body });
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.#body!.push(chunk);
  }

  onComplete(): void {
    this.#release();
    this.#body?.end();
  }

  onError(err: Error): void {
    this.#fail(err);
  }

  #aborted(signal: AbortSignal): void {
    const reason = abortReason(signal);
    if (this.#abort) this.#abort(reason);
    else if (!this.#settled) this.#fail(reason);
  }

  #release(): void {
    if (this.#onAbort) this.signal!.removeEventListener('abort', this.#onAbort);
  }

  #fail(err: Error): void {
    this.#release();
    if (this.#body) this.#body.fail(err);
    else if (!this.#settled) {
      this.#settled = true;
      this.reject(err);
    }
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('This operation was aborted', 'AbortError');
}

/**
 * The response body: chunks in arrival order for a single consumer. Ends normally, with the
 * backend's error (thrown by the consumer's next read), or early by {@link destroy} (the
 * consumer's iteration simply ends, and the connection is closed).
 */
export class ExchangeBody implements BackendBody {
  readonly #resume: () => void;
  readonly #abort: Abort;
  #chunks: Buffer[] = [];
  #queued = 0;
  #paused = false;
  #ended = false;
  #error: Error | undefined;
  #destroyed = false;
  /** The consumer waiting for the next chunk or the end. */
  #wake: (() => void) | undefined;
  #discarding = false;
  #discarded = 0;

  constructor(resume: () => void, abort: Abort) {
    this.#resume = resume;
    this.#abort = abort;
  }

  /** The whole body is here: reading the rest of it waits for nothing (held-answer.ts). */
  get arrived(): boolean {
    return this.#ended && this.#error === undefined && !this.#destroyed;
  }

  /** From undici: false pauses the socket. */
  push(chunk: Buffer): boolean {
    if (this.#destroyed) return true;
    if (this.#discarding) {
      this.#discarded += chunk.length;
      if (this.#discarded > DUMP_LIMIT_BYTES) this.destroy();
      return true;
    }
    this.#chunks.push(chunk);
    this.#queued += chunk.length;
    this.#signal();
    if (this.#queued < HIGH_WATER_BYTES) return true;
    this.#paused = true;
    return false;
  }

  end(): void {
    this.#ended = true;
    this.#signal();
  }

  fail(err: Error): void {
    if (this.#ended || this.#destroyed) return;
    this.#error = err;
    this.#ended = true;
    this.#signal();
  }

  /** Stops reading: the request is aborted (its connection closed) and iteration ends. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#chunks = [];
    this.#queued = 0;
    if (!this.#ended) this.#abort(new DOMException('The body was not read to its end', 'AbortError') as unknown as Error);
    this.#signal();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        const chunk = this.#take();
        if (chunk) {
          yield chunk;
          continue;
        }
        if (this.#destroyed) return;
        if (this.#ended) {
          if (this.#error) throw this.#error;
          return;
        }
        await new Promise<void>((resolve) => (this.#wake = resolve));
      }
    } finally {
      // A consumer that stops early (break, or an error in its loop) gives the body up.
      if (!this.#ended) this.destroy();
    }
  }

  async bytes(): Promise<Uint8Array> {
    // The usual answer is all here by the time it is read (headers, body and end in one read
    // of the socket): taken at once, without the iteration's generator and awaits (issue 29).
    if (this.arrived && !this.#paused) return this.#takeAll();
    const chunks: Buffer[] = [];
    for await (const chunk of this) chunks.push(chunk);
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  async text(): Promise<string> {
    return Buffer.from(await this.bytes()).toString('utf8');
  }

  /** Reads and discards the rest (up to {@link DUMP_LIMIT_BYTES}), so the connection can be reused. */
  async dump(): Promise<void> {
    this.#chunks = [];
    this.#queued = 0;
    if (this.#ended || this.#destroyed) return;
    this.#discarding = true;
    this.#resumeIfPaused();
    await new Promise<void>((resolve) => {
      const check = () => {
        if (this.#ended || this.#destroyed) resolve();
        else this.#wake = check;
      };
      check();
    });
  }

  #takeAll(): Buffer {
    const chunks = this.#chunks;
    this.#chunks = [];
    this.#queued = 0;
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  #take(): Buffer | undefined {
    const chunk = this.#chunks.shift();
    if (!chunk) return undefined;
    this.#queued -= chunk.length;
    this.#resumeIfPaused();
    return chunk;
  }

  #resumeIfPaused(): void {
    if (this.#paused && this.#queued < HIGH_WATER_BYTES) {
      this.#paused = false;
      this.#resume();
    }
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
