/**
 * The span export's bounded queue (src/telemetry/span-queue.ts, issue 44 part 1) with the real
 * SDK tracer and the gateway's OTLP/HTTP exporter (the SDK's HTTP export delegate with our JSON
 * encoder, src/telemetry/otlp-trace-exporter.ts), against collectors on loopback: one that accepts
 * and never answers, one that refuses connections (a closed port), and the real receiver
 * (test/fixtures/otlp-receiver.ts). Small limits, so the bound is reached with a few spans.
 */
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { OtlpJsonTraceExporter } from '../../src/telemetry/otlp-trace-exporter.js';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { BoundedSpanQueue, type SpanDropReason, type TraceRequestExporter } from '../../src/telemetry/span-queue.js';
import type { Recorded } from '../fixtures/otlp-receiver.js';
import { waitUntil } from '../helpers/child.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { freePort } from '../helpers/free-port.js';

const LIMITS = { maxQueue: 8, batchSize: 4, delayMs: 20, exportTimeoutMs: 300 };
const held = new Set<Socket>();
const stalling = createServer((socket) => {
  held.add(socket);
  socket.on('data', () => {});
  socket.on('close', () => held.delete(socket));
});
let receiver: FixtureChild | undefined;

before(async () => {
  await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
  receiver = await startFixtureChild('otlp-receiver.ts');
});

after(async () => {
  for (const s of held) s.destroy();
  stalling.close();
  await receiver?.child.stop();
});

/** A tracer exporting through the queue to `endpoint`, and the drops it counted. */
/** `exportTimeoutMs`: LIMITS' 300 ms, or longer where the collector is healthy and the timeout not the subject. */
function tracing(endpoint: string, exportTimeoutMs = LIMITS.exportTimeoutMs) {
  const drops: Record<SpanDropReason, number> = { queue_full: 0, export_failed: 0 };
  const queue = new BoundedSpanQueue(new OtlpJsonTraceExporter({ url: `${endpoint}/v1/traces`, timeoutMillis: exportTimeoutMs }), (reason, n) => (drops[reason] += n), { ...LIMITS, exportTimeoutMs });
  const provider = new TracerProvider({ spanProcessors: [queue] });
  const tracer = provider.getTracer('span-queue-test');
  const spans = (n: number, name = 'call') => {
    for (let i = 0; i < n; i++) tracer.startSpan(`${name} ${i}`).end();
  };
  return { drops, spans, provider };
}

test('a collector that never answers: one batch in flight, the queue at its bound, every other span counted', async () => {
  const { drops, spans, provider } = tracing(`http://127.0.0.1:${(stalling.address() as { port: number }).port}`);
  spans(LIMITS.batchSize); // the first batch leaves at once, and hangs
  spans(LIMITS.maxQueue + 5); // the queue fills behind it; 5 more are dropped
  assert.deepEqual(drops, { queue_full: 5, export_failed: 0 });
  // The hung batch is given up after the export timeout and counted; the next one goes.
  await waitUntil(async () => (drops.export_failed >= LIMITS.batchSize ? true : undefined), { what: 'the hung batch counted', timeoutMs: 20_000, intervalMs: 20 });
  spans(3);
  assert.ok(drops.queue_full <= 5 + 3, `no more than the new spans dropped: ${JSON.stringify(drops)}`);
  for (const s of held) s.destroy();
  await provider.shutdown();
  // Whatever was not exported was counted: nothing is held or lost without a count.
  assert.equal(drops.queue_full + drops.export_failed, LIMITS.batchSize + LIMITS.maxQueue + 5 + 3, JSON.stringify(drops));
});

test('a collector that refuses connections: each batch fails at once and is counted, the queue never fills', async () => {
  const { drops, spans, provider } = tracing(`http://127.0.0.1:${await freePort()}`);
  spans(LIMITS.batchSize);
  await waitUntil(async () => (drops.export_failed === LIMITS.batchSize ? true : undefined), { what: 'the refused batch counted', timeoutMs: 20_000, intervalMs: 20 });
  spans(LIMITS.batchSize);
  await provider.shutdown();
  assert.deepEqual(drops, { queue_full: 0, export_failed: 2 * LIMITS.batchSize });
});

test('a healthy collector gets every span, batched, and nothing is counted dropped', async () => {
  // 10 s: on a loaded machine an export to a healthy receiver took longer than 300 ms, and the
  // shutdown rightly stopped at that batch (a test race, seen under a full suite run).
  const { drops, spans, provider } = tracing(receiver!.url, 10_000);
  spans(LIMITS.batchSize * 2 + 1, 'healthy');
  await provider.shutdown();
  const recorded = (await (await fetch(`${receiver!.url}/recorded`)).json()) as Recorded;
  assert.equal(recorded.spans.filter((s) => s.name.startsWith('healthy ')).length, LIMITS.batchSize * 2 + 1);
  assert.deepEqual(drops, { queue_full: 0, export_failed: 0 });
});

test('shutdown with a collector that never answers gives up at the first batch it did not take, and counts the rest dropped', async () => {
  const port = (stalling.address() as { port: number }).port;
  const drops: Record<SpanDropReason, number> = { queue_full: 0, export_failed: 0 };
  const exporter = new OtlpJsonTraceExporter({ url: `http://127.0.0.1:${port}/v1/traces`, timeoutMillis: LIMITS.exportTimeoutMs });
  let exports = 0;
  const counting: TraceRequestExporter = {
    export: (batch, done) => {
      exports++;
      exporter.export(batch, done);
    },
    shutdown: () => exporter.shutdown(),
  };
  const provider = new TracerProvider({ spanProcessors: [new BoundedSpanQueue(counting, (reason, n) => (drops[reason] += n), LIMITS)] });
  const tracer = provider.getTracer('span-queue-shutdown');
  // One batch in flight (it hangs) and a full queue behind it: two more batches' worth.
  for (let i = 0; i < LIMITS.batchSize + LIMITS.maxQueue; i++) tracer.startSpan(`held ${i}`).end();
  await provider.shutdown();
  // The hung batch was the only export: the flush did not send the queued batches to a collector that took none.
  assert.equal(exports, 1);
  assert.deepEqual(drops, { queue_full: 0, export_failed: LIMITS.batchSize + LIMITS.maxQueue });
});

test('spans of two resources and two scopes, interleaved: each goes out in a request of its own resource and scope, none lost', async () => {
  const drops: Record<SpanDropReason, number> = { queue_full: 0, export_failed: 0 };
  // Requests of 2 spans, 12 queued: 6 requests may wait (each span here starts one).
  const queue = new BoundedSpanQueue(new OtlpJsonTraceExporter({ url: `${receiver!.url}/v1/traces`, timeoutMillis: 10_000 }), (reason, n) => (drops[reason] += n), { ...LIMITS, maxQueue: 12, batchSize: 2, exportTimeoutMs: 10_000 });
  const providers = ['queue-a', 'queue-b'].map((service) => new TracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [queue] }));
  const tracers = providers.flatMap((p) => [p.getTracer('scope-1'), p.getTracer('scope-2', '2')]);
  // A change of resource or scope closes the request being filled and starts another.
  for (let i = 0; i < 6; i++) tracers[i % tracers.length]!.startSpan(`mixed ${i}`).end();
  await queue.shutdown();
  const recorded = (await (await fetch(`${receiver!.url}/recorded`)).json()) as Recorded;
  const mixed = recorded.spans.filter((s) => s.name.startsWith('mixed '));
  assert.deepEqual(mixed.map((s) => s.name).sort(), [0, 1, 2, 3, 4, 5].map((i) => `mixed ${i}`));
  for (const s of mixed) {
    const i = Number(s.name.slice('mixed '.length));
    assert.equal(s.resource['service.name'], i % 4 < 2 ? 'queue-a' : 'queue-b', s.name);
    assert.equal(s.scope, i % 2 ? 'scope-2' : 'scope-1', s.name);
  }
  assert.deepEqual(drops, { queue_full: 0, export_failed: 0 });
});

test('spans that change resource on every span cannot hold more requests than the span bound allows: the rest are counted dropped', async () => {
  const drops: Record<SpanDropReason, number> = { queue_full: 0, export_failed: 0 };
  const queue = new BoundedSpanQueue(new OtlpJsonTraceExporter({ url: `http://127.0.0.1:${(stalling.address() as { port: number }).port}/v1/traces`, timeoutMillis: LIMITS.exportTimeoutMs }), (reason, n) => (drops[reason] += n), LIMITS);
  const tracers = ['bound-a', 'bound-b'].map((service) => new TracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [queue] }).getTracer('t'));
  // Span 1 closes span 0's request, which goes out and hangs; spans 2 and 3 close the next two,
  // which wait: LIMITS allow maxQueue / batchSize = 2. From span 4 on, a span of the resource
  // being filled (b: 5, 7, 9) joins its request, and one of the other (a: 4, 6, 8) would need a
  // third waiting request: dropped.
  for (let i = 0; i < 10; i++) tracers[i % 2]!.startSpan(`bound ${i}`).end();
  assert.equal(drops.queue_full, 3, JSON.stringify(drops));
  for (const s of held) s.destroy();
  await queue.shutdown();
  assert.equal(drops.queue_full + drops.export_failed, 10, JSON.stringify(drops));
});
