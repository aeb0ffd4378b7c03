/**
 * src/ops/utf8-batch-writer.ts on its own: what its fast paths write is what the plain way
 * writes — `integer(n, width)` is `String(n)` padded with zeros, for every digit count and width
 * (the digits are counted only when a number may be wider than asked); `bytes()` copies pieces
 * of every length either side of the bound between its JavaScript copy and `set`; `write` and
 * `jsonString` of short and long, ASCII and not, are `Buffer.from` and `JSON.stringify`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Utf8BatchWriter } from '../../src/ops/utf8-batch-writer.js';

test('integer(n, width) is String(n) padded with zeros to width, for every digit count and width', () => {
  const w = new Utf8BatchWriter(Buffer.alloc(8));
  const expected: string[] = [];
  const numbers = [0, 1, 9, 10, 99, 100, 999_999_999, 1_000_000_000, 1_000_000_001, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 1_796_022_646, Number.MAX_SAFE_INTEGER];
  for (let k = 0; k <= 15; k++) numbers.push(10 ** k - 1, 10 ** k, 10 ** k + 7);
  for (const n of numbers) {
    for (const width of [1, 2, 3, 8, 9, 10, 12]) {
      w.integer(n, width);
      w.byte(0x2c);
      expected.push(String(n).padStart(width, '0'));
    }
  }
  // Anything that is not a safe non-negative integer is String(n).
  for (const n of [-1, 1.5, 2 ** 53, Number.NaN]) {
    w.integer(n, 3);
    w.byte(0x2c);
    expected.push(String(n));
  }
  assert.equal(w.view().toString('latin1'), expected.map((e) => `${e},`).join(''));
});

test('bytes() copies pieces of every length, either side of its JavaScript copy bound, and grows the buffer', () => {
  const w = new Utf8BatchWriter(Buffer.alloc(4));
  const pieces = Array.from({ length: 40 }, (_, n) => Buffer.from(Array.from({ length: n }, (_, i) => 0x41 + ((n + i) % 26))));
  for (const piece of pieces) w.bytes(piece);
  assert.deepEqual(w.view(), Buffer.concat(pieces));
});

test('write and jsonString: short and long, ASCII and not, as Buffer.from and JSON.stringify write them', () => {
  const texts = ['', 'a', 'tools/call echo', 'x'.repeat(24), 'x'.repeat(25), 'é', 'ü'.repeat(30), '日本', '😀', 'a"b', 'back\\slash', '\u0007', 'line\u2028', '\ud800', 'y'.repeat(300)];
  const w = new Utf8BatchWriter(Buffer.alloc(4));
  for (const t of texts) w.write(t);
  assert.equal(w.view().toString('utf8'), Buffer.from(texts.join('')).toString('utf8'));
  const j = new Utf8BatchWriter(Buffer.alloc(4));
  for (const t of texts) j.jsonString(t);
  assert.equal(j.view().toString('utf8'), texts.map((t) => JSON.stringify(t)).join(''));
});
