/**
 * The OpenTelemetry SDK's own cost on this machine (issue 44 part 1: "measure the OTel SDK's
 * own cost per span, to know the floor"): what no change to the gateway can take below, in
 * process, CPU time (user + system) of this process.
 *
 * - span: `startSpan` with the attributes a gateway SERVER span carries (12), `end`, and its
 *   export to a real receiver (bench/otlp-sink.ts, its own process), flushed before the clock
 *   stops — the JSON encoding and the posts included. Twice: the SDK's own way (its
 *   `BatchSpanProcessor` and `OTLPTraceExporter`, with its `JsonTraceSerializer`), and the
 *   gateway's (src/telemetry/span-queue.ts writing each span into its request as it ends,
 *   src/telemetry/otlp-trace-exporter.ts: the SDK's HTTP export delegate);
 * - span, not exported: the same without the queue's export (the tracer's work alone);
 * - encoding alone: a batch of 512 such spans as the OTLP JSON the exporter posts — by the SDK's
 *   `JsonTraceSerializer` and by ours (src/telemetry/otlp-json-spans.ts), checked to be the same
 *   text first — and as OTLP protobuf, per span;
 * - histogram: one `record` with the 9 metric attributes of a call, a new object each time as
 *   the gateway's was (the SDK hashes them); and the same record into the gateway's own histogram
 *   (src/telemetry/duration-histogram.ts, issue 44), given the span's attributes as the gateway
 *   gives them (no copy: it reads the metric keys and finds the cell by their values);
 * - context: W3C `traceparent` extracted from text and injected back (what each hop does).
 *
 *   node --import tsx bench/otel-floor.ts [spans per round, default 20000] [rounds, default 5]
 *
 * Medians over rounds. Bounded: a fixed number of operations.
 */
import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { DurationHistogram } from '../src/telemetry/duration-histogram.js';
import { METRIC_KEYS, METRIC_SLOTS } from '../src/telemetry/mcp-attributes.js';
import { OtlpJsonTraceSerializer } from '../src/telemetry/otlp-json-spans.js';
import { OtlpJsonTraceExporter } from '../src/telemetry/otlp-trace-exporter.js';
import { BoundedSpanQueue } from '../src/telemetry/span-queue.js';
import { SpanAttributes } from '../src/telemetry/span-attributes.js';
import { median } from './load.js';
import { startOtlpSink } from './processes.js';

const N = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 5);

const ATTRIBUTES = {
  'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'gen_ai.operation.name': 'execute_tool', 'jsonrpc.request.id': '42',
  'mcp.session.id': 'd3b07384-d113-4ec4-9a6c-2c5c2f1e5a10', 'mcp.protocol.version': '2025-11-25', 'client.address': '127.0.0.1', 'client.port': 51234,
  'network.transport': 'tcp', 'network.protocol.name': 'http', 'network.protocol.version': '1.1', 'switchboard.backend': 'fast',
};
const METRIC_ATTRIBUTES = {
  'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'gen_ai.operation.name': 'execute_tool', 'mcp.protocol.version': '2025-11-25',
  'network.transport': 'tcp', 'network.protocol.name': 'http', 'network.protocol.version': '1.1', 'switchboard.backend': 'fast', 'server.port': 8080,
};

const cpuNow = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

async function perOp(run: () => void | Promise<void>, n: number): Promise<number> {
  const before = cpuNow();
  await run();
  return (cpuNow() - before) / n;
}

const { child: sink, url: sinkUrl } = await startOtlpSink();
try {
  const url = `${sinkUrl}/v1/traces`;
  let dropped = 0;
  const exportedSdk = new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), maxExportBatchSize: 512, maxQueueSize: 2048 });
  const exported = new BoundedSpanQueue(new OtlpJsonTraceExporter({ url }), (_reason, n) => (dropped += n));
  // The tracer's work alone: a processor that takes the span and lets it go.
  const nothing: SpanProcessor = { onStart: () => {}, onEnd: () => {}, forceFlush: async () => {}, shutdown: async () => {} };
  const tracers = {
    exportedSdk: { provider: new TracerProvider({ spanProcessors: [exportedSdk] }) },
    exported: { provider: new TracerProvider({ spanProcessors: [exported] }) },
    local: { provider: new TracerProvider({ spanProcessors: [nothing] }) },
  };
  const spans = (provider: TracerProvider) => async () => {
    const tracer = provider.getTracer('floor');
    // In batches the queue holds whole (512), each flushed before the next: none dropped.
    for (let i = 0; i < N; i++) {
      tracer.startSpan('tools/call echo', { kind: SpanKind.SERVER, attributes: { ...ATTRIBUTES } }).end();
      if (i % 512 === 511) await provider.forceFlush();
    }
    await provider.forceFlush();
  };
  // 512 ended spans, kept, for the encoders.
  const kept: ReadableSpan[] = [];
  const keeping = new TracerProvider({ spanProcessors: [{ ...nothing, onEnd: (span: ReadableSpan) => void kept.push(span) }] }).getTracer('floor');
  for (let i = 0; i < 512; i++) keeping.startSpan('tools/call echo', { kind: SpanKind.SERVER, attributes: { ...ATTRIBUTES } }).end();
  const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes!).toString('utf8');
  if (text(OtlpJsonTraceSerializer.serializeRequest(kept)) !== text(JsonTraceSerializer.serializeRequest(kept))) throw new Error('our OTLP JSON differs from the SDK serializer\'s');
  const encode = (serializer: { serializeRequest(spans: ReadableSpan[]): Uint8Array | undefined }) => () => {
    for (let i = 0; i < N / 512; i++) serializer.serializeRequest(kept);
  };
  // A meter provider without a reader records nothing: this one has the gateway's (OTLP/HTTP, exporting once a minute).
  const meters = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: url.replace('/v1/traces', '/v1/metrics') }), exportIntervalMillis: 60_000 })] });
  const buckets = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];
  const histogram = meters.getMeter('floor').createHistogram('mcp.server.operation.duration', { unit: 's', advice: { explicitBucketBoundaries: buckets } });
  const ours = new DurationHistogram({ name: 'mcp.server.operation.duration', description: '', keys: METRIC_KEYS, slots: METRIC_SLOTS, boundaries: buckets });
  // The span's attributes as the gateway's SpanLife holds them (its 12 and `server.port`, in their layout): the record reads its metric slots.
  const span = SpanAttributes.of({ ...ATTRIBUTES, 'server.port': 8080 }).values;
  const propagator = new W3CTraceContextPropagator();
  const carrier = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
  const runs: Array<[string, () => void | Promise<void>]> = [
    ['span, exported (SDK encoder)', spans(tracers.exportedSdk.provider)],
    ['span, exported (our encoder)', spans(tracers.exported.provider)],
    ['span, not exported', spans(tracers.local.provider)],
    ['OTLP JSON encoding (SDK)', encode(JsonTraceSerializer)],
    ['OTLP JSON encoding (ours)', encode(OtlpJsonTraceSerializer)],
    ['OTLP protobuf encoding alone', encode(ProtobufTraceSerializer)],
    ['histogram record (9 attributes)', () => {
      for (let i = 0; i < N; i++) histogram.record(0.001 * (i % 7), { ...METRIC_ATTRIBUTES }); // a new object per call, as the gateway's
    }],
    ['histogram record, ours', () => {
      for (let i = 0; i < N; i++) ours.record(0.001 * (i % 7), span);
    }],
    ['traceparent extract + inject', () => {
      for (let i = 0; i < N; i++) {
        const ctx = propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
        const out: Record<string, string> = {};
        propagator.inject(trace.setSpanContext(ctx, trace.getSpanContext(ctx)!), out, defaultTextMapSetter);
      }
    }],
  ];
  const figures: Record<string, number[]> = Object.fromEntries(runs.map(([name]) => [name, []]));
  for (const [, run] of runs) await run(); // warm-up
  for (let r = 0; r < ROUNDS; r++) for (const [name, run] of runs) figures[name]!.push(await perOp(run, N));
  for (const [name, xs] of Object.entries(figures)) console.log(`${name.padEnd(34)} ${median(xs).toFixed(2).padStart(6)} µs CPU each  (rounds: ${xs.map((x) => x.toFixed(2)).join(', ')})`);
  // Ours ÷ the SDK's within each round (the machine may be loaded: the ratio of one round is steadier than either figure).
  const ratio = (ours: string, sdk: string) => median(figures[ours]!.map((x, i) => x / figures[sdk]![i]!)).toFixed(2);
  console.log(`ours ÷ SDK, median of rounds: encoding ${ratio('OTLP JSON encoding (ours)', 'OTLP JSON encoding (SDK)')}, exported span ${ratio('span, exported (our encoder)', 'span, exported (SDK encoder)')}, histogram record ${ratio('histogram record, ours', 'histogram record (9 attributes)')}`);
  const counts = (await (await fetch(url.replace('/v1/traces', '/counts'))).json()) as Record<string, { requests: number; bytes: number }>;
  console.log(`receiver: ${counts['/v1/traces']?.requests ?? 0} posts, ${((counts['/v1/traces']?.bytes ?? 0) / 1e6).toFixed(1)} MB; spans dropped: ${dropped}`);
  await Promise.all([tracers.exportedSdk.provider.shutdown(), tracers.exported.provider.shutdown(), tracers.local.provider.shutdown(), meters.shutdown()]);
} finally {
  await sink.stop();
}
