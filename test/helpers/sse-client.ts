/**
 * A small raw SSE reader for tests that must see event ids, `retry` and priming events
 * exactly as the gateway sent them (the SDK client hides them). Every read has a deadline.
 */
import assert from 'node:assert/strict';

const DEFAULT_TIMEOUT_MS = 10_000;

export interface SseEvent {
  id?: string;
  event?: string;
  retry?: number;
  /** undefined when the block had no data line at all */
  data?: string;
}

export function parseSseBlock(block: string): SseEvent | undefined {
  const ev: SseEvent = {};
  const data: string[] = [];
  let any = false;
  for (const line of block.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    any = true;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'id') ev.id = value;
    else if (field === 'event') ev.event = value;
    else if (field === 'retry') ev.retry = Number(value);
  }
  if (!any) return undefined;
  if (data.length) ev.data = data.join('\n');
  return ev;
}

/** Reads SSE blocks (comments skipped) from a fetch body. */
export class SseReader {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder = new TextDecoder();
  #buffer = '';
  #queue: SseEvent[] = [];
  #done = false;
  #pending: Promise<ReadableStreamReadResult<Uint8Array>> | undefined;

  constructor(res: Response) {
    assert.ok(res.body, 'response has a body');
    this.#reader = res.body.getReader();
  }

  /** The next event, or undefined when the stream ended. Throws after `timeoutMs`. */
  async next(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<SseEvent | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.#queue.length) return this.#queue.shift();
      if (this.#done) return undefined;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no SSE event within ${timeoutMs} ms`);
      this.#pending ??= this.#reader.read();
      let timer: NodeJS.Timeout | undefined;
      const result = await Promise.race([
        this.#pending,
        new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), remaining))),
      ]).finally(() => clearTimeout(timer));
      if (result === 'timeout') continue;
      this.#pending = undefined;
      if (result.done) {
        this.#done = true;
        this.#buffer += this.#decoder.decode();
      } else {
        this.#buffer += this.#decoder.decode(result.value, { stream: true });
      }
      const blocks = this.#buffer.split(/\r?\n\r?\n/);
      this.#buffer = this.#done ? '' : blocks.pop()!;
      for (const block of blocks) {
        const ev = parseSseBlock(block);
        if (ev) this.#queue.push(ev);
      }
    }
  }

  /** Events until `stop(event)` is true (inclusive) or the stream ends, within one overall deadline. */
  async until(stop: (e: SseEvent) => boolean, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<SseEvent[]> {
    const deadline = Date.now() + timeoutMs;
    const events: SseEvent[] = [];
    for (;;) {
      const ev = await this.next(Math.max(1, deadline - Date.now()));
      if (!ev) return events;
      events.push(ev);
      if (stop(ev)) return events;
    }
  }

  async cancel(): Promise<void> {
    await this.#reader.cancel().catch(() => {});
  }
}

/** The JSON-RPC message of an event, if it has one. */
export function messageOf(e: SseEvent): Record<string, unknown> | undefined {
  if (!e.data) return undefined;
  try {
    return JSON.parse(e.data) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}
