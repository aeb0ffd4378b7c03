/**
 * The messages of one backend answer, one at a time, for the bridges between the MCP
 * eras that must stop reading in the middle of a call and go on later, maybe minutes later,
 * for another HTTP request of the client (a parked call, stateless/parked-calls.ts), or that
 * read a 2026-07-28 backend's answer to find its `input_required` result (modern/).
 *
 * Reading is pulled: while nobody asks for the next message the socket is not read, so a
 * parked call costs a paused connection and nothing more. `nextWithin` lets the bridge wait a
 * moment for the requests a server sends together (several `sendRequest` in one tick) without
 * losing the read it started: a read only fills the queue of ready messages, and only `next`
 * and `nextWithin` take from it, so a read left in flight when `nextWithin` gave up puts what it
 * reads where the next call finds it (issue 28 §6: a backend that writes a call's result before
 * it acknowledges the answer the result follows lost that result to such a read).
 *
 * The answer is read by its content type (wire/message-reader.ts): SSE events, or JSON values
 * one after another — a 2026-07-28 backend may answer `subscriptions/listen` or a call with
 * progress as JSON lines kept open (issue 29), and a one-message JSON answer is the same read.
 * One message is at most {@link MAX_MESSAGE_BYTES}: past it the read ends with {@link failure}
 * said, and the backend's connection is closed, rather than held without bound.
 */
import type { BackendBody } from './body.js';
import { createMessageReader, type MessageReader } from '../wire/message-reader.js';

export type BackendMessage = Record<string, unknown>;

/**
 * The longest message read (bytes of JSON, characters of an SSE event). Far above a tool
 * result a client would take in one message (the relays stream bigger answers instead of
 * parsing them), the bound of a WebSocket client's unread bytes (transport/websocket-bridge.ts).
 */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export class BackendMessages {
  /** Set while the call these messages belong to waits, parked, for its client (stateless/parked-calls.ts). */
  parked = false;
  readonly #chunks: AsyncIterator<Buffer | string>;
  readonly #ready: BackendMessage[] = [];
  readonly #reader: MessageReader;
  #failure: Error | undefined;
  /** The read in flight: resolves once a message is ready or the stream ended; takes nothing. */
  #filling: Promise<void> | undefined;
  /** A read of the body in flight, kept when an injected message answered first. */
  #chunk: Promise<IteratorResult<Buffer | string>> | undefined;
  #wake: (() => void) | undefined;
  #ended = false;
  #closed = false;
  readonly #onClose: Array<() => void> = [];

  /** `contentType`: the answer's media type (`BackendResponse.contentType`); JSON for `application/json`, SSE otherwise. */
  constructor(
    private readonly body: BackendBody,
    contentType: string,
    maxMessageBytes = MAX_MESSAGE_BYTES,
  ) {
    this.#chunks = (body as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]();
    this.#reader = createMessageReader(contentType, maxMessageBytes, {
      onMessage: (text) => {
        const message = parseObject(text);
        if (message) this.#ready.push(message);
      },
      onTooLarge: () => {
        this.#failure = new Error(`the backend sent a message longer than ${maxMessageBytes} bytes`);
        this.#ended = true;
        this.body.destroy();
      },
    });
  }

  /** Why the messages ended early (a message past the bound), or undefined: they ended with the body, or go on. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** The next message, or undefined once the stream ended (or failed). */
  async next(): Promise<BackendMessage | undefined> {
    while (!this.#ready.length && !this.#ended) await this.#fill();
    return this.#ready.shift();
  }

  /** The next message if one comes within `ms`; 'quiet' otherwise (the read goes on, and what it reads waits for the next call). */
  async nextWithin(ms: number): Promise<BackendMessage | undefined | 'quiet'> {
    if (this.#ready.length) return this.#ready.shift();
    if (this.#ended) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<'quiet'>((resolve) => (timer = setTimeout(resolve, ms, 'quiet')));
    try {
      for (;;) {
        if ((await Promise.race([this.#fill(), quiet])) === 'quiet') return 'quiet';
        if (this.#ready.length || this.#ended) return this.#ready.shift();
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Adds a message as if the body had carried it: a request the backend sent for this call on
   * another of its streams (the session's GET stream, stateless/legacy-streams.ts).
   */
  inject(message: BackendMessage): void {
    if (this.#closed) return;
    this.#ready.push(message);
    this.#wake?.();
  }

  /** Calls back once, when the messages are closed. */
  onClose(callback: () => void): void {
    if (this.#closed) callback();
    else this.#onClose.push(callback);
  }

  /** Stops reading and closes the backend's connection, which is the backend's cancellation signal. */
  close(): void {
    this.#ended = true;
    this.body.destroy();
    if (this.#closed) return;
    this.#closed = true;
    this.#wake?.();
    for (const callback of this.#onClose.splice(0)) callback();
  }

  /** One read shared by every caller waiting: until a message is ready, the stream ends or a message is injected. */
  #fill(): Promise<void> {
    this.#filling ??= this.#read().finally(() => (this.#filling = undefined));
    return this.#filling;
  }

  async #read(): Promise<void> {
    while (!this.#ready.length && !this.#ended) {
      this.#chunk ??= this.#chunks.next().catch((): IteratorResult<Buffer | string> => ({ done: true, value: undefined }));
      const woken = new Promise<'woken'>((resolve) => (this.#wake = () => resolve('woken')));
      const chunk = await Promise.race([this.#chunk, woken]);
      this.#wake = undefined;
      if (chunk === 'woken') continue;
      this.#chunk = undefined;
      if (!chunk.done) this.#reader.feed(chunk.value);
      else {
        this.#ended = true;
        this.#reader.end();
      }
    }
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
