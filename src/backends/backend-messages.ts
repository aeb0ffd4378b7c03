/**
 * The messages of one backend SSE answer, one at a time, for the bridges between the MCP
 * eras that must stop reading in the middle of a call and go on later, maybe minutes later,
 * for another HTTP request of the client (a parked call, stateless/parked-calls.ts), or that
 * read a 2026-07-28 backend's answer to find its `input_required` result (modern/).
 *
 * Reading is pulled: while nobody asks for the next message the socket is not read, so a
 * parked call costs a paused connection and nothing more. `nextWithin` lets the bridge wait a
 * moment for the requests a server sends together (several `sendRequest` in one tick) without
 * losing the read it started: an unfinished read is kept for the next call.
 */
import type { BackendBody } from './body.js';
import { createSseReader } from '../wire/sse.js';

export type BackendMessage = Record<string, unknown>;

export class BackendMessages {
  readonly #chunks: AsyncIterator<Buffer | string>;
  readonly #ready: BackendMessage[] = [];
  readonly #reader = createSseReader({
    onEvent: (data) => {
      const message = data === '' ? undefined : parseObject(data);
      if (message) this.#ready.push(message);
    },
  });
  #pending: Promise<BackendMessage | undefined> | undefined;
  #ended = false;

  constructor(private readonly body: BackendBody) {
    this.#chunks = (body as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]();
  }

  /** The next message, or undefined once the stream ended (or failed). */
  next(): Promise<BackendMessage | undefined> {
    this.#pending ??= this.#read().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  /** The next message if one comes within `ms`; 'quiet' otherwise (the read goes on for the next call). */
  async nextWithin(ms: number): Promise<BackendMessage | undefined | 'quiet'> {
    if (this.#ready.length) return this.#ready.shift();
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<'quiet'>((resolve) => (timer = setTimeout(resolve, ms, 'quiet')));
    try {
      return await Promise.race([this.next(), quiet]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops reading and closes the backend's connection, which is the backend's cancellation signal. */
  close(): void {
    this.#ended = true;
    this.body.destroy();
  }

  async #read(): Promise<BackendMessage | undefined> {
    while (!this.#ready.length) {
      if (this.#ended) return undefined;
      let chunk: IteratorResult<Buffer | string>;
      try {
        chunk = await this.#chunks.next();
      } catch {
        chunk = { done: true, value: undefined };
      }
      if (chunk.done) {
        this.#ended = true;
        break;
      }
      this.#reader.feed(chunk.value);
    }
    return this.#ready.shift();
  }
}

/** The JSON object a text holds, or undefined (not JSON, or not an object): a backend's garbage is skipped, not fatal. */
export function parseObject(text: string): BackendMessage | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as BackendMessage) : undefined;
  } catch {
    return undefined;
  }
}
