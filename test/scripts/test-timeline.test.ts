/**
 * scripts/test-timeline.mjs (issue 43): the run's files laid beside the machine's CPU samples
 * say how long the run had all its files going and how busy the cores were then.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
// @ts-expect-error: a plain .mjs script, no declarations
import { fileSpans, machineSamples, timeline } from '../../scripts/test-timeline.mjs';

test('reads the probe lines with their start and end, and skips lines without them', () => {
  const text = '3.00\t1.00\t2.00\ttest/a.test.ts\t100.0\t130.0\n1.00\t1.00\t0.00\ttest/old.test.ts\n';
  assert.deepEqual(fileSpans(text), [[100, 130]]);
  assert.deepEqual(machineSamples('100 500 300\n105 1300 500\nbroken\n'), [[100, 500, 300], [105, 1300, 500]]);
});

test('the seconds with every slot taken, the cores busy share then, and the seconds below', () => {
  // Two files side by side from 100 to 110, then one alone until 120; samples every 5 s.
  const spans = [[100, 110], [100, 120]];
  const samples = [
    [100, 0, 0],
    [105, 800, 200], // 80 % busy, two files
    [110, 1400, 600], // 60 % busy, two files
    [115, 1800, 1200], // one file
    [120, 2200, 1800], // one file
  ];
  const result = timeline(spans, samples, 2);
  assert.equal(result.fullS, 10);
  assert.equal(result.belowS, 10);
  assert.ok(Math.abs(result.fullBusyShare - 0.7) < 1e-9, String(result.fullBusyShare));
});
