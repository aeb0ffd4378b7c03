/**
 * The messages of a stdio backend's stdout, one per line (MCP 2025-11-25 "Transports", stdio:
 * "Messages are delimited by newlines, and MUST NOT contain embedded newlines"). Bytes, not
 * text: a newline byte never occurs inside a UTF-8 multi-byte character, so a character split
 * across two chunks needs no decoder, and a line is handed on as the very bytes the child
 * wrote — the gateway relays it without serialising it again.
 *
 * One line is bounded: a child that writes without ever ending its line (a runaway loop, a
 * binary dumped to stdout) would otherwise make the gateway hold all of it.
 */

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/** A line longer than the splitter's bound: thrown by `feed` as soon as the bound is passed. */
export class LineTooLongError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the backend wrote a line longer than ${maxBytes} bytes`);
    this.name = 'LineTooLongError';
  }
}

export interface LineSplitter {
  /** The next chunk of stdout; `line` is called for each line it completes, without its line break. */
  feed(chunk: Buffer, line: (bytes: Buffer) => void): void;
}

/** Splits stdout into lines of at most `maxBytes` each; blank lines are skipped. */
export function createLineSplitter(maxBytes: number): LineSplitter {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  return {
    feed(chunk, line) {
      let start = 0;
      for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
        const part = chunk.subarray(start, end);
        start = end + 1;
        if (pendingBytes + part.length > maxBytes) throw new LineTooLongError(maxBytes);
        const whole = pendingBytes === 0 ? part : Buffer.concat([...pending, part], pendingBytes + part.length);
        pending = [];
        pendingBytes = 0;
        // A CRLF line end (some servers on Windows) is a line end too.
        const text = whole.length > 0 && whole[whole.length - 1] === CARRIAGE_RETURN ? whole.subarray(0, -1) : whole;
        if (text.length > 0) line(text);
      }
      if (start >= chunk.length) return;
      const rest = chunk.subarray(start);
      if (pendingBytes + rest.length > maxBytes) throw new LineTooLongError(maxBytes);
      pending.push(rest);
      pendingBytes += rest.length;
    },
  };
}
