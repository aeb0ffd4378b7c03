/**
 * JSON-RPC messages one after another in an `application/json` body, as JSON lines: how the
 * conformance suite's reference server answers `subscriptions/listen` (MCP 2026-07-28
 * "Subscriptions"; `examples/servers/typescript` of modelcontextprotocol/conformance: one
 * message per line, chunked, the stream left open) and a call with progress before its result.
 * A message is found by its brackets, not its line breaks: a pretty-printed message spans
 * lines, and a stream may end without a final newline. Bytes, not text: `{`, `}`, `[`, `]`,
 * `"` and `\` never occur inside a UTF-8 multi-byte character, so a character split across
 * two chunks needs no decoder here.
 */

import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './json-guard.js';

const NEWLINE = 0x0a;

export interface JsonMessageSplitter {
  /** The next chunk as it came off the socket; returns the messages it completed, as bytes. */
  feed(chunk: Buffer): Buffer[];
  /** What is left once the body ended: a last, unterminated value (sent on as it is), or nothing. */
  end(): Buffer | undefined;
}

/** A message longer than the splitter's `maxBytes`: thrown by `feed` as soon as the bound is passed. */
export class MessageTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`a message exceeded ${maxBytes} bytes`);
    this.name = 'MessageTooLargeError';
  }
}

/**
 * Splits a body into its top-level JSON values (objects or batches), as they complete. With
 * `maxBytes`, a value (or the bytes before one) longer than that throws
 * {@link MessageTooLargeError} instead of growing the pending bytes without bound: a backend
 * that never closes its brackets cannot make a reader hold its stream whole.
 */
export function createJsonMessageSplitter(maxBytes = Infinity): JsonMessageSplitter {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let depth = 0;
  let inString = false;
  let escaped = false;
  return {
    feed(chunk) {
      const out: Buffer[] = [];
      let start = 0;
      for (let i = 0; i < chunk.length; i++) {
        const byte = chunk[i]!;
        if (inString) {
          if (escaped) escaped = false;
          else if (byte === BACKSLASH) escaped = true;
          else if (byte === QUOTE) inString = false;
        } else if (byte === QUOTE) inString = true;
        else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++;
        else if ((byte === CLOSE_BRACE || byte === CLOSE_BRACKET) && --depth === 0) {
          if (pendingBytes + i + 1 - start > maxBytes) throw new MessageTooLargeError(maxBytes);
          pending.push(chunk.subarray(start, i + 1));
          out.push(trimmed(pending.length === 1 ? pending[0]! : Buffer.concat(pending)));
          pending = [];
          pendingBytes = 0;
          start = i + 1;
        }
      }
      if (start < chunk.length) {
        pendingBytes += chunk.length - start;
        if (pendingBytes > maxBytes) throw new MessageTooLargeError(maxBytes);
        pending.push(chunk.subarray(start));
      }
      return out;
    },
    end() {
      const rest = pending.length ? trimmed(Buffer.concat(pending)) : undefined;
      pending = [];
      pendingBytes = 0;
      return rest?.length ? rest : undefined;
    },
  };
}

/**
 * False when the body is surely one message: no line break with content after it (compact
 * JSON has none). The common case costs one native search; true sends the body through the
 * splitter, which tells a pretty-printed message from JSON lines.
 */
export function maySpanLines(body: Buffer): boolean {
  const at = body.indexOf(NEWLINE);
  if (at === -1) return false;
  for (let i = at + 1; i < body.length; i++) if (!isSpace(body[i]!)) return true;
  return false;
}

/** The value without the whitespace between messages (JSON insignificant whitespace, RFC 8259 §2). */
function trimmed(bytes: Buffer): Buffer {
  let from = 0;
  let to = bytes.length;
  while (from < to && isSpace(bytes[from]!)) from++;
  while (to > from && isSpace(bytes[to - 1]!)) to--;
  return from === 0 && to === bytes.length ? bytes : bytes.subarray(from, to);
}

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === NEWLINE;
}
