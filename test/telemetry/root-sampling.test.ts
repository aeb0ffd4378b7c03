/**
 * src/telemetry/root-sampling.ts: a root's sampling decision and its trace id (issue 44 part 1).
 * The decision must be the SDK's own — its TraceIdRatioBasedSampler on the very trace id the
 * recorded root then carries — so that trace ids stay ratio-consistent with other services
 * sampling by trace id.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { RootSampling } from '../../src/telemetry/root-sampling.js';

test('about the ratio of roots is admitted, each under a trace id the SDK sampler samples', () => {
  const roots = new RootSampling(0.25);
  const sdk = new TraceIdRatioBasedSampler(0.25);
  let admitted = 0;
  const n = 20_000;
  for (let i = 0; i < n; i++) {
    const id = roots.admit();
    if (id === undefined) continue;
    admitted++;
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.equal(sdk.shouldSample(ROOT_CONTEXT, id).decision, SamplingDecision.RECORD_AND_SAMPLED, `admitted ${id}`);
  }
  // 20,000 draws at 0.25: the standard deviation of the share is 0.003.
  assert.ok(Math.abs(admitted / n - 0.25) < 0.02, `${admitted} of ${n} admitted`);
});

test('each drawn root is admitted exactly when the SDK sampler samples the id of its four words', () => {
  // A fixed stream of words (a linear congruential generator), so every draw's id is known:
  // the roots refused are checked too, not only those admitted.
  let state = 0x2545f491;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
  const random = Math.random;
  const hex = (w: number) => w.toString(16).padStart(8, '0');
  try {
    for (const ratio of [0.1, 0.25, 0.5, 0.999, 1e-9]) {
      const roots = new RootSampling(ratio);
      const sdk = new TraceIdRatioBasedSampler(ratio);
      let admitted = 0;
      for (let i = 0; i < 5_000; i++) {
        const words = [next(), next(), next(), next()];
        let k = 0;
        Math.random = () => words[k++]! / 4294967296;
        const id = roots.admit();
        assert.equal(k, 4, 'four words a root');
        const drawn = words.map(hex).join('');
        const sampled = sdk.shouldSample(ROOT_CONTEXT, drawn).decision === SamplingDecision.RECORD_AND_SAMPLED;
        assert.equal(id, sampled ? drawn : undefined, `ratio ${ratio}, id ${drawn}`);
        if (id) admitted++;
      }
      if (ratio >= 0.1) assert.ok(admitted > 0 && admitted < 5_000, `ratio ${ratio}: ${admitted} admitted`);
    }
  } finally {
    Math.random = random;
  }
});

test('ratio 1 admits every root under a new trace id, ratio 0 none', () => {
  const all = new RootSampling(1);
  const ids = new Set(Array.from({ length: 100 }, () => all.admit()));
  assert.equal(ids.size, 100, 'a new trace id each time');
  for (const id of ids) assert.match(id ?? '', /^[0-9a-f]{32}$/);
  const none = new RootSampling(0);
  for (let i = 0; i < 100; i++) assert.equal(none.admit(), undefined);
});

test('span ids are 16 hex digits, new each time', () => {
  const roots = new RootSampling(0.5);
  const ids = new Set(Array.from({ length: 100 }, () => roots.spanId()));
  assert.equal(ids.size, 100);
  for (const id of ids) assert.match(id, /^[0-9a-f]{16}$/);
});

test('ids are the random words in hex, an all-zero one made valid by a last 1, as the SDK\'s generator does', () => {
  const random = Math.random;
  const roots = new RootSampling(1);
  try {
    Math.random = () => 0;
    assert.equal(roots.admit(), `${'0'.repeat(31)}1`);
    assert.equal(roots.spanId(), `${'0'.repeat(15)}1`);
    Math.random = () => 0.9999999999;
    assert.equal(roots.admit(), 'f'.repeat(32));
    assert.equal(roots.spanId(), 'f'.repeat(16));
    // 0x12345678 / 2^32, each word: its digits in order.
    Math.random = () => 0x12345678 / 4294967296;
    assert.equal(roots.admit(), '12345678'.repeat(4));
    assert.equal(roots.spanId(), '12345678'.repeat(2));
  } finally {
    Math.random = random;
  }
  // Every digit at every place, over a few thousand ids.
  const seen = Array.from({ length: 16 }, () => new Set<string>());
  for (let i = 0; i < 4000; i++) [...roots.spanId()].forEach((d, at) => seen[at]!.add(d));
  for (const digits of seen) assert.equal(digits.size, 16);
});
