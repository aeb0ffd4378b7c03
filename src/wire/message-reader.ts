/**
 * The JSON-RPC messages of a body by its content type, as they complete: the events of a
 * `text/event-stream` (MCP 2025-11-25 "Transports"), or the JSON values one after another of an
 * `application/json` body — one message, or JSON lines kept open as the conformance suite's
 * reference server answers `subscriptions/listen` and a 2026-07-28 server may answer a call
 * with its progress first (issue 29; json-lines.ts). Both framings are bounded alike: a message
 * longer than `maxBytes` (the SSE parser counts characters) is reported once and nothing more
 * is read, so a backend cannot make its reader hold an endless message.
 */
import { createJsonMessageSplitter, MessageTooLargeError } from './json-lines.js';
import { createSseReader } from './sse.js';

export interface MessageReaderHandlers {
  /** One message's text (an SSE event's data, or one JSON value); priming events are not reported. */
  onMessage(text: string): void;
  /** A message passed the bound; the reader takes nothing after it. */
  onTooLarge(): void;
}

export interface MessageReader {
  /** The next chunk as it came off the socket. */
  feed(chunk: Buffer | string): void;
  /** The body ended: JSON without a final newline still holds its last value. */
  end(): void;
}

/** A reader for `contentType` (a media type without parameters): JSON for `application/json`, SSE otherwise. */
export function createMessageReader(contentType: string, maxBytes: number, handlers: MessageReaderHandlers): MessageReader {
  const { onMessage, onTooLarge } = handlers;
  if (contentType !== 'application/json') {
    const sse = createSseReader({ onEvent: (data) => data !== '' && onMessage(data), onTooLarge, maxEventChars: maxBytes });
    return { feed: (chunk) => sse.feed(chunk), end: () => {} };
  }
  const splitter = createJsonMessageSplitter(maxBytes);
  let spent = false;
  return {
    feed(chunk) {
      if (spent) return;
      let messages: Buffer[];
      try {
        messages = splitter.feed(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      } catch (err) {
        if (!(err instanceof MessageTooLargeError)) throw err;
        spent = true;
        return onTooLarge();
      }
      for (const message of messages) onMessage(message.toString('utf8'));
    },
    end() {
      const rest = spent ? undefined : splitter.end();
      if (rest) onMessage(rest.toString('utf8'));
    },
  };
}
