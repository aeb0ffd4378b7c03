/**
 * src/telemetry/root-sampling.ts: a root's sampling decision taken before the tracer is asked
 * (issue 44 part 1). The decision must be the SDK's own (its TraceIdRatioBasedSampler on the
 * trace id the span then gets), so that trace ids stay ratio-consistent, and the tracer must
 * record exactly the roots admitted, with the admitted id.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, ParentBasedSampler, SamplingDecision, SimpleSpanProcessor, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { RootSampling } from '../../src/telemetry/root-sampling.js';

test('about the ratio of roots is admitted, each admitted id one the SDK sampler samples', () => {
  const roots = new RootSampling(0.25);
  const sdk = new TraceIdRatioBasedSampler(0.25);
  let admitted = 0;
  const n = 20_000;
  for (let i = 0; i < n; i++) {
    if (!roots.admit()) continue;
    admitted++;
    const id = roots.generateTraceId();
    assert.equal(sdk.shouldSample(ROOT_CONTEXT, id).decision, SamplingDecision.RECORD_AND_SAMPLED, `admitted ${id}`);
  }
  // 20,000 draws at 0.25: the standard deviation of the share is 0.003.
  assert.ok(Math.abs(admitted / n - 0.25) < 0.02, `${admitted} of ${n} admitted`);
});

test('an admitted id is handed out once; then ids are random again', () => {
  const roots = new RootSampling(0.5);
  while (!roots.admit());
  const first = roots.generateTraceId();
  const second = roots.generateTraceId();
  assert.match(first, /^[0-9a-f]{32}$/);
  assert.match(second, /^[0-9a-f]{32}$/);
  assert.notEqual(first, second);
  roots.admit();
  roots.settle();
  assert.match(roots.generateSpanId(), /^[0-9a-f]{16}$/);
});

test('ratio 1 admits every root, ratio 0 none, without drawing an id', () => {
  assert.equal(new RootSampling(1).admit(), true);
  assert.equal(new RootSampling(0).admit(), false);
});

test('the tracer records exactly the admitted roots, with the admitted trace id', async () => {
  const roots = new RootSampling(0.3);
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.3) }), idGenerator: roots, spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const tracer = provider.getTracer('root-sampling-test');
  const expected: string[] = [];
  for (let i = 0; i < 500; i++) {
    if (!roots.admit()) continue;
    const span = tracer.startSpan('root');
    roots.settle();
    assert.ok(span.isRecording(), 'an admitted root records');
    expected.push(span.spanContext().traceId);
    span.end();
    // A child follows its parent's flag, whatever the ratio.
    const child = tracer.startSpan('child', {}, trace.setSpan(ROOT_CONTEXT, span));
    assert.ok(child.isRecording());
    assert.equal(child.spanContext().traceId, span.spanContext().traceId);
    child.end();
  }
  await provider.forceFlush();
  const recorded = exporter.getFinishedSpans().filter((s) => s.name === 'root');
  assert.deepEqual(recorded.map((s) => s.spanContext().traceId), expected);
  assert.ok(expected.length > 100 && expected.length < 200, `${expected.length} of 500 at 0.3`);
  await provider.shutdown();
});
