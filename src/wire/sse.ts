/**
 * Server-Sent Events on the wire (WHATWG HTML §9.2 "Server-sent events"; MCP 2025-11-25
 * "Transports"): the one place that parses an SSE body and the one that writes events, so
 * that every path (the stream relay, the initialize reader, the WebSocket bridge, the
 * rewriting of `/mcp` and of a tool policy) splits lines and frames events alike.
 *
 * Also the rewriting of a backend's SSE body event by event, without waiting for the stream
 * to end (progress and server→client requests must arrive while a call runs). Used where
 * routing must change what passes through (SPEC §1: "params and results untouched except
 * where routing must rewrite them"): names namespaced by the aggregated endpoint, tools
 * removed by a tool policy.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser } from 'eventsource-parser';

export interface SseHandlers {
  /** Each dispatched event; `data` is '' for a priming event (an id and no data). */
  onEvent(data: string, id: string | undefined): void;
  /** A `retry` field, in ms (the server's invitation to reconnect after that long). */
  onRetry?(ms: number): void;
  /**
   * With `maxEventChars`: the event being read (its data and the line in progress) grew past
   * that many characters. The reader is then spent: it takes no more chunks.
   */
  onTooLarge?(): void;
  /** The bound `onTooLarge` reports; none when unset. */
  maxEventChars?: number;
}

export interface SseReader {
  /** The next chunk of the body, as it came off the socket. */
  feed(chunk: Buffer | string): void;
}

/**
 * The one SSE parser entry. Bytes go through a UTF-8 decoder, not `chunk.toString()`: a
 * multi-byte character may straddle two chunks. Comments (keep-alives) and `event:` types
 * are not reported: MCP sends every message as a plain `message` event.
 */
export function createSseReader(handlers: SseHandlers): SseReader {
  const { onEvent, onTooLarge } = handlers;
  let spent = false;
  const parser = createParser({
    onEvent: (event) => onEvent(event.data, event.id),
    onRetry: handlers.onRetry,
    maxBufferSize: handlers.maxEventChars,
    onError: (error) => {
      if (error.type !== 'max-buffer-size-exceeded') return;
      spent = true;
      onTooLarge?.();
    },
  });
  const decoder = new StringDecoder('utf8');
  return {
    feed: (chunk) => {
      if (!spent) parser.feed(typeof chunk === 'string' ? chunk : decoder.write(chunk));
    },
  };
}

/**
 * The data of each event a whole SSE body holds, in order; priming events (an id and no data)
 * are left out (MCP 2025-11-25 "Resumability and Redelivery"). The body SDK servers write for
 * a call — the response as one event, then the end — is read without the parser
 * ({@link plainSoleEventData}); any other goes through it once, for all who ask of it
 * (issue 29: the one-event check and the complete-answer check read one list).
 */
export function eventDataOf(body: Buffer): string[] {
  const text = body.toString('utf8');
  const plain = plainSoleEventData(text);
  if (plain !== NOT_PLAIN) return plain === undefined ? [] : [plain];
  const events: string[] = [];
  createSseReader({
    onEvent: (event) => {
      if (event !== '') events.push(event);
    },
  }).feed(text);
  return events;
}

/**
 * The data of the one event a whole SSE body holds, or undefined when it holds more than one or
 * none (priming events do not count). An SDK server answers a call so by default: the response
 * as one event, then the end; the gateway can then answer with that message alone (issue 29).
 */
export function soleEventData(body: Buffer): string | undefined {
  const events = eventDataOf(body);
  return events.length === 1 ? events[0] : undefined;
}

const NOT_PLAIN = Symbol('not a plain one-event body');
/** Skipped by SSE parsers at the start of a stream (WHATWG HTML §9.2.5): left to the parser. */
const BYTE_ORDER_MARK = 0xfeff;

/**
 * {@link eventDataOf} for the body SDK servers write — one event of `event:`/`id:` lines and
 * one `data:` line, ended by a blank line, LF line breaks — read with `indexOf` instead of the
 * parser (issue 29). {@link NOT_PLAIN} for any other body, which the parser then reads: CR line
 * breaks, several events, data on several lines, a field line without a colon, a byte order mark.
 */
function plainSoleEventData(text: string): string | undefined | typeof NOT_PLAIN {
  const end = text.length - 2;
  if (end < 0 || text.indexOf('\n\n') !== end || text.includes('\r') || text.charCodeAt(0) === BYTE_ORDER_MARK) return NOT_PLAIN;
  let data: string | undefined;
  for (let start = 0; start < end; ) {
    let stop = text.indexOf('\n', start);
    if (stop < 0 || stop > end) stop = end;
    const colon = text.indexOf(':', start);
    if (colon < 0 || colon > stop) return NOT_PLAIN;
    if (colon - start === 4 && text.startsWith('data', start)) {
      if (data !== undefined) return NOT_PLAIN;
      data = text.slice(text.charCodeAt(colon + 1) === 0x20 ? colon + 2 : colon + 1, stop);
    }
    start = stop + 1;
  }
  // A priming event (an id and no data) is no event of its own here (see soleEventData).
  return data === '' ? undefined : data;
}

/** A line break in SSE: CRLF, a lone CR or a lone LF (WHATWG HTML §9.2.5 "end-of-line"). */
const LINE_BREAK = /\r\n|\r|\n/;

/**
 * One event in wire form. Multi-line data becomes one `data:` line per line, split at every
 * kind of line break the reader would split at (else a lone CR would end the field early
 * on the client). `retryMs` makes a priming event (`formatSseEvent('', id, retryMs)`, MCP
 * 2025-11-25 "Resumability and Redelivery"). The common single-line message (compact JSON)
 * is one template, not a split and a join.
 */
export function formatSseEvent(data: string, id?: string, retryMs?: number): string {
  let head = id === undefined ? '' : `id: ${id}\n`;
  if (retryMs !== undefined) head += `retry: ${retryMs}\n`;
  if (!data.includes('\n') && !data.includes('\r')) return `${head}data: ${data}\n\n`;
  for (const line of data.split(LINE_BREAK)) head += `data: ${line}\n`;
  return `${head}\n`;
}

/** A `retry` field alone: how long the client waits before reconnecting (sent before a deliberate close). */
export function formatSseRetry(ms: number): string {
  return `retry: ${ms}\n\n`;
}

/**
 * The response headers of every SSE answer the gateway sends: no caching or transforming by
 * intermediaries, and `X-Accel-Buffering: no`, which tells nginx-style proxies not to buffer the
 * stream (see docs/deploy.md, "Ingress and SSE").
 */
export const SSE_RESPONSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' } as const;

/** A comment line: keeps proxies and load balancers from cutting a quiet stream; readers ignore it. */
export const SSE_KEEP_ALIVE = ': keep-alive\n\n';

/** The event to send instead, or undefined to drop it. `data` is '' for a priming event. */
export type SseEventTransform = (data: string, id: string | undefined) => { data: string; id?: string } | undefined;

export async function* transformSse(body: AsyncIterable<Buffer | string>, transform: SseEventTransform): AsyncGenerator<Buffer> {
  let out: string[] = [];
  const reader = createSseReader({
    onEvent: (data, id) => {
      const next = transform(data, id);
      if (next) out.push(formatSseEvent(next.data, next.id));
    },
  });
  for await (const chunk of body) {
    reader.feed(chunk);
    if (out.length) {
      const ready = out.join('');
      out = [];
      yield Buffer.from(ready);
    }
  }
}
