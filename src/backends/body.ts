/**
 * The body of a backend response as the MCP layer consumes it: chunks to read one by one
 * (an SSE stream, message by message), or the whole of it at once. A real backend's body is
 * an {@link ExchangeBody} (exchange.ts); bodies the gateway makes itself (an answer composed
 * by the aggregated endpoint, or a backend stream rewritten on its way through) come from
 * {@link syntheticBody}. To pipe one into a reply, wrap it with `Readable.from`.
 */
import { Readable } from 'node:stream';
import type { BackendResponse } from './backend.js';

export interface BackendBody extends AsyncIterable<Buffer> {
  /** Reads and discards the rest, so the connection can be reused. */
  dump(): Promise<void>;
  text(): Promise<string>;
  /** The whole body as bytes (for answers small enough to send in one write). */
  bytes(): Promise<Uint8Array>;
  /** Stops reading; a body still arriving from a backend closes its connection. */
  destroy(): void;
  /** True once the whole body has arrived (read or not), so reading the rest waits for nothing; absent when unknown. */
  readonly arrived?: boolean;
}

/** Wraps text or a chunk source as a BackendBody. */
export function syntheticBody(source: string | AsyncIterable<Buffer | string>): BackendBody {
  const stream = (typeof source === 'string' ? Readable.from([Buffer.from(source)]) : Readable.from(source)) as Readable & BackendBody;
  stream.dump = async () => {
    // Destroying the stream makes the source generator return (its finally blocks run).
    stream.destroy();
  };
  stream.bytes = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks);
  };
  stream.text = async () => Buffer.from(await stream.bytes()).toString('utf8');
  return stream;
}

/** A body's bytes or chunk as a Buffer over the same memory (a string, as its UTF-8). */
export function asBuffer(value: Uint8Array | string): Buffer {
  if (typeof value === 'string') return Buffer.from(value);
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}

/** Told once when a body over another is done with: read to its end, dumped, destroyed, or stopped early. */
export interface BodyEnd {
  settled?(): void;
}

/** What a {@link tappedBody} tells: the complete bytes once they have all passed, then that it is done. */
export interface BodyTap extends BodyEnd {
  onBytes(bytes: Buffer): void;
}

/**
 * `body` unchanged for its reader, with `tap.onBytes` told the complete bytes once they have all
 * passed (by `bytes()`, `text()` or iteration; not when the reader stops early or dumps it).
 * For an observer that needs the whole answer but must not change how it is relayed: the
 * relay keeps the backend's length and its one-write path (held-answer.ts). Chunks are kept
 * only until the end, as a reader that parsed the answer would hold them. `tap.settled`, when
 * there, is called once after `onBytes` or when the reader dumps, destroys or stops early (a
 * span that must end whatever becomes of the answer). An object, not callbacks: nothing is
 * made per answer but the body (issue 44 part 1).
 */
export function tappedBody(body: BackendBody, tap: BodyTap): BackendBody {
  return new TappedBody(body, tap);
}

/** A body over another one: `dump()` and `destroy()` reach it at once, after `onDone` (called once, also by subclasses when read to the end). */
export abstract class OverBody {
  #done = false;

  constructor(
    protected readonly source: BackendBody,
    private readonly onDone?: BodyEnd,
  ) {}

  protected done(): void {
    if (this.#done) return;
    this.#done = true;
    this.onDone?.settled?.();
  }

  get arrived(): boolean | undefined {
    return this.source.arrived;
  }

  abstract bytes(): Promise<Uint8Array>;

  /**
   * `read` — the source's own `bytes()` — handed back as it is, `tell` given the bytes by a
   * reaction added to it before the reader's: the reader's `await` runs after it, so they have
   * been told when the reader goes on; then `settled`. Not an async `bytes()` of its own: each
   * promise more resolved with the bytes costs an await and a look-up of `then` along a
   * Buffer's four prototypes (issue 44 part 1). A `tell` that throws is a defect of the
   * observer, not of the answer: the reader still gets the bytes.
   */
  protected tellWhole(read: Promise<Uint8Array>, tell: (bytes: Buffer) => void): Promise<Uint8Array> {
    read.then(
      (bytes) => {
        try {
          tell(asBuffer(bytes));
        } catch {
          // Told nothing more; `settled` still follows.
        } finally {
          this.done();
        }
      },
      () => this.done(),
    );
    return read;
  }

  async text(): Promise<string> {
    return Buffer.from(await this.bytes()).toString('utf8');
  }

  dump(): Promise<void> {
    this.done();
    return this.source.dump();
  }

  destroy(): void {
    this.done();
    this.source.destroy();
  }
}

class TappedBody extends OverBody implements BackendBody {
  constructor(
    body: BackendBody,
    private readonly tap: BodyTap,
  ) {
    super(body, tap);
  }

  bytes(): Promise<Uint8Array> {
    return this.tellWhole(this.source.bytes(), (bytes) => this.tap.onBytes(bytes));
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    const seen: Buffer[] = [];
    try {
      for await (const chunk of this.source) {
        seen.push(chunk);
        yield chunk;
      }
      this.tap.onBytes(seen.length === 1 ? seen[0]! : Buffer.concat(seen));
    } finally {
      this.done();
    }
  }
}

/**
 * `body` unchanged for its reader, telling `ended` once how its reading ended — read to the end
 * (no error), failed (the error) — or `dropped` when the reader dumps, destroys or stops early.
 * `bytes()` and `text()` stay the source's own (one read of the whole answer, not an iteration
 * chunk by chunk, as a body made of an async generator would be), so a watcher that only
 * needs to know when the answer is over costs the relay nothing (issue 44: the audit's records
 * still pending at the end, policy/unanswered.ts).
 */
export function watchedBody(body: BackendBody, ended: (error?: unknown) => void, dropped: () => void): BackendBody {
  return new WatchedBody(body, ended, dropped);
}

class WatchedBody extends OverBody implements BackendBody {
  #ended = false;

  constructor(
    body: BackendBody,
    private readonly ended: (error?: unknown) => void,
    dropped: () => void,
  ) {
    super(body, {
      settled: () => {
        if (!this.#ended) dropped();
      },
    });
  }

  #end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.ended(error);
  }

  /** The source's own promise, watched by a reaction added before the reader's (as {@link OverBody.tellWhole}), the source's error told too. */
  bytes(): Promise<Uint8Array> {
    const all = this.source.bytes();
    all.then(
      () => this.#endDone(),
      (err: unknown) => this.#endDone(err),
    );
    return all;
  }

  /** A watcher that throws is a defect of the watcher, not of the answer: the reader still gets the bytes (or the source's error). */
  #endDone(error?: unknown): void {
    try {
      this.#end(error);
    } catch {
      // `dropped` is not called for a read that ended.
    } finally {
      this.done();
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    try {
      yield* this.source;
      this.#end();
    } catch (err) {
      this.#end(err);
      throw err;
    } finally {
      this.done();
    }
  }
}

/** The whole body as bytes, or undefined (the body destroyed, its connection closed) once it passes `maxBytes`. */
export async function bytesWithin(body: BackendBody, maxBytes: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      return undefined;
    }
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * `res` with another body, its members named one by one: how every face swaps a response's body.
 * Not `{ ...res, body }`: a response a class made (policy/answer-observe.ts `WatchedResponse`) is
 * spread by V8's slow object clone, about 1.1 k instructions each audited call paid (issue 44
 * part 1).
 */
export function withBody(res: BackendResponse, body: BackendBody): BackendResponse {
  const out: BackendResponse = { status: res.status, headers: res.headers, body, contentType: res.contentType };
  if (res.refused !== undefined) out.refused = res.refused;
  return out;
}
