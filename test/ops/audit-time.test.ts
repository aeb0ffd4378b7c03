/**
 * src/ops/logger.ts isoTime: a record's `time` is `toISOString()`'s text, written from a prefix
 * made once per second (issue 44 part 1). Checked against `toISOString()` itself at every
 * millisecond pattern that could go wrong: each padding width, second and day boundaries, the
 * epoch, and times in order and out of order (the prefix is remade when the second changes
 * either way).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoTime } from '../../src/ops/logger.js';

const same = (ms: number) => assert.equal(isoTime(ms), new Date(ms).toISOString(), `at ${ms}`);

test('each millisecond of a second, across a second and a day boundary', () => {
  const midnight = Date.UTC(2026, 10, 30);
  for (let ms = midnight - 1500; ms < midnight + 1500; ms++) same(ms);
});

test('the epoch, leap day, far years, and times out of order', () => {
  for (const ms of [0, 1, 999, 1000, Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(2024, 2, 1), Date.UTC(9999, 11, 31, 23, 59, 59, 999), 1_764_460_800_007]) same(ms);
  let seed = 7;
  for (let i = 0; i < 5000; i++) {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    same(Date.UTC(2026, 0, 1) + (seed % (400 * 86_400_000)));
  }
});
