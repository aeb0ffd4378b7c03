/**
 * A log destination for a gateway under test: every JSON line it writes, kept in order, so a
 * test can read what an operator would see (pino writes one or more lines per chunk).
 */
import { Writable } from 'node:stream';

export interface LogLines {
  stream: Writable;
  lines: string[];
}

export function captureLogLines(): LogLines {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { stream, lines };
}
