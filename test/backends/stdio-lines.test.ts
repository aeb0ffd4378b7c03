/**
 * A stdio backend's stdout split into its messages (src/backends/bridge/stdio-lines.ts, MCP
 * "Transports", stdio: newline-delimited, no embedded newlines): lines across chunk borders, a
 * multi-byte character split between chunks, CRLF, blank lines skipped, and the bound on one line.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLineSplitter, LineTooLongError } from '../../src/backends/bridge/stdio-lines.js';

function split(chunks: Array<string | Buffer>, maxBytes = 1024): string[] {
  const splitter = createLineSplitter(maxBytes);
  const lines: string[] = [];
  for (const chunk of chunks) splitter.feed(typeof chunk === 'string' ? Buffer.from(chunk) : chunk, (line) => lines.push(line.toString('utf8')));
  return lines;
}

describe('stdout lines', () => {
  test('lines within one chunk and across chunk borders; a line still open is held', () => {
    assert.deepEqual(split(['{"a":1}\n{"b"', ':2}\n{"c":', '3']), ['{"a":1}', '{"b":2}']);
  });

  test('a multi-byte character split between two chunks arrives whole', () => {
    const bytes = Buffer.from('{"text":"héllo ✓"}\n');
    const cut = bytes.indexOf(0x9c) - 1; // inside the three bytes of ✓
    assert.deepEqual(split([bytes.subarray(0, cut), bytes.subarray(cut)]), ['{"text":"héllo ✓"}']);
  });

  test('CRLF ends a line too; blank lines are skipped', () => {
    assert.deepEqual(split(['{"a":1}\r\n\n\r\n{"b":2}\n']), ['{"a":1}', '{"b":2}']);
  });

  test('a line longer than the bound throws as soon as it passes it, in one chunk or over many', () => {
    assert.throws(() => split(['x'.repeat(1025)]), LineTooLongError);
    assert.throws(() => split(['x'.repeat(600), 'x'.repeat(600)]), /longer than 1024 bytes/);
    assert.deepEqual(split(['x'.repeat(1024), '\n']), ['x'.repeat(1024)]);
  });
});
