/**
 * The gateway's own duration histograms (src/telemetry/duration-histogram.ts, found through
 * attribute-cells.ts, exported through metric-producer.ts) export what the SDK's histogram
 * exported for the same records (issue 44 part 1): the same values with the same attribute sets
 * recorded (a) through `meter.createHistogram(...).record(value, metricAttributes(span))` as
 * otel-sdk.ts did, and (b) through ours with the span's attributes as they are, each collected by
 * an SDK `MetricReader` (ours as its `metricProducers`), and the collections compared whole —
 * scope, descriptor, temporality, attributes, count, sum, min, max, boundaries and bucket
 * counts — with only the timestamps, which neither side lets a test set, put aside (ours checked
 * on their own: start at the cell's first record, end at the collection).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HrTime } from '@opentelemetry/api';
import { hrTimeToMilliseconds } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, MetricReader, type CollectionResult, type MetricProducer } from '@opentelemetry/sdk-metrics';
import { DurationHistogram } from '../../src/telemetry/duration-histogram.js';
import { METRIC_KEYS, METRIC_SLOTS, metricAttributes, type Attributes } from '../../src/telemetry/mcp-attributes.js';
import { SpanAttributes } from '../../src/telemetry/span-attributes.js';
import { HistogramProducer } from '../../src/telemetry/metric-producer.js';
import { MCP_DURATION_BUCKETS } from '../../src/telemetry/otel-sdk.js';

class Reader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const SERVER = { name: 'mcp.server.operation.duration', description: 'MCP request or notification duration as observed on the receiver.' };
const CLIENT = { name: 'mcp.client.operation.duration', description: 'The duration of the MCP request or notification as observed on the sender.' };
const SESSION = { name: 'mcp.server.session.duration', description: 'The duration of the MCP session as observed on the MCP server.' };
const SESSION_KEYS = ['network.transport', 'network.protocol.name', 'mcp.protocol.version'];
const SCOPE = { name: 'switchboard', version: '9.9.9' };

interface Pair {
  record(metric: 'server' | 'client' | 'session', value: number, span: Attributes): void;
  collect(): Promise<{ sdk: CollectionResult; ours: CollectionResult }>;
}

/** The SDK's histograms and ours side by side, each behind a reader of its own. */
function pair(cardinalityLimit = 2000): Pair {
  const resource = resourceFromAttributes({ 'service.name': 'switchboard' });
  const sdkReader = new Reader({ cardinalitySelector: () => cardinalityLimit });
  const meter = new MeterProvider({ resource, readers: [sdkReader] }).getMeter(SCOPE.name, SCOPE.version);
  const sdkHistogram = (m: { name: string; description: string }) => meter.createHistogram(m.name, { unit: 's', description: m.description, advice: { explicitBucketBoundaries: MCP_DURATION_BUCKETS } });
  const sdk = { server: sdkHistogram(SERVER), client: sdkHistogram(CLIENT), session: sdkHistogram(SESSION) };
  const ourHistogram = (m: { name: string; description: string }, keys: readonly string[], slots?: readonly number[]) => new DurationHistogram({ ...m, keys, slots, boundaries: MCP_DURATION_BUCKETS, cardinalityLimit });
  const ours = { server: ourHistogram(SERVER, METRIC_KEYS, METRIC_SLOTS), client: ourHistogram(CLIENT, METRIC_KEYS, METRIC_SLOTS), session: ourHistogram(SESSION, SESSION_KEYS) };
  const producer: MetricProducer = new HistogramProducer(SCOPE, [ours.server, ours.client, ours.session], resource);
  const ourReader = new Reader({ metricProducers: [producer] });
  new MeterProvider({ resource, readers: [ourReader] });
  return {
    record(metric, value, span) {
      // As otel-sdk.ts recorded before: a new object of the metric attributes per record.
      // Ours as otel-sdk.ts records now: the span's layout (span-attributes.ts), or the session's three values in SESSION_KEYS' order.
      if (metric === 'session') {
        sdk.session.record(value, { ...span });
        ours.session.record(value, SESSION_KEYS.map((key) => span[key]));
        return;
      }
      const attributes = SpanAttributes.of(span);
      sdk[metric].record(value, metricAttributes(attributes));
      ours[metric].record(value, attributes.values);
    },
    collect: async () => ({ sdk: await sdkReader.collect(), ours: await ourReader.collect() }),
  };
}

/** The collection without its timestamps, and the timestamps of its points (start, end) in ms. */
function untimed(result: CollectionResult): { scopes: unknown; times: Array<[number, number]> } {
  const times: Array<[number, number]> = [];
  const scopes = result.resourceMetrics.scopeMetrics.map((s) => ({
    ...s,
    metrics: s.metrics.map((m) => ({
      ...m,
      dataPoints: (m.dataPoints as Array<{ startTime: HrTime; endTime: HrTime }>).map(({ startTime, endTime, ...rest }) => {
        times.push([hrTimeToMilliseconds(startTime), hrTimeToMilliseconds(endTime)]);
        return rest;
      }),
    })),
  }));
  return { scopes, times };
}

async function assertSame(p: Pair, window: { from: number }): Promise<void> {
  const { sdk, ours } = await p.collect();
  assert.deepEqual(ours.errors, []);
  assert.equal(ours.resourceMetrics.resource, sdk.resourceMetrics.resource, 'the SDK resource, kept by the reader');
  const a = untimed(sdk);
  const b = untimed(ours);
  assert.deepEqual(b.scopes, a.scopes);
  for (const [start, end] of b.times) {
    assert.ok(start >= window.from - 1 && start <= end && end <= Date.now() + 1, `point from ${start} to ${end}`);
  }
}

const SPAN: Attributes = {
  'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'gen_ai.operation.name': 'execute_tool', 'jsonrpc.request.id': '42',
  'mcp.session.id': 'd3b07384', 'mcp.protocol.version': '2025-11-25', 'client.address': '127.0.0.1', 'client.port': 51234,
  'network.transport': 'tcp', 'network.protocol.name': 'http', 'network.protocol.version': '1.1', 'switchboard.backend': 'fast',
};
const CLIENT_SPAN: Attributes = { ...SPAN, 'server.address': 'backend', 'server.port': 8080 };
delete CLIENT_SPAN['network.protocol.version'];

/** Values on, between, below and above the boundaries, in the order of a day's calls. */
const VALUES = [0, 0.001, 0.01, 0.010000001, 0.02, 0.05, 0.3, 1, 2.5, 10, 60, 299.9, 300, 300.5, 5000, 0.0049, 1e-9];

test('the same records export the same histograms as the SDK\'s, across collections (cumulative)', async () => {
  const from = Date.now();
  const p = pair();
  await assertSame(p, { from }); // nothing recorded: no scope on either side
  const spans: Attributes[] = [
    SPAN,
    { ...SPAN, 'gen_ai.tool.name': 'weather', 'jsonrpc.request.id': '43', 'mcp.session.id': 'other' }, // other tool
    { ...SPAN, 'error.type': 'tool_error' },
    { ...SPAN, 'error.type': '-32602', 'rpc.response.status_code': '-32602' },
    { 'mcp.method.name': 'initialize', 'network.transport': 'tcp', 'network.protocol.name': 'http', 'network.protocol.version': '2', 'switchboard.backend': 'fast' },
    { 'mcp.method.name': 'prompts/get', 'gen_ai.prompt.name': 'p', 'network.transport': 'tcp', 'network.protocol.name': 'http', 'switchboard.backend': 'slow' },
    { ...SPAN, 'switchboard.backend': '8080' }, // a string and a number of the same digits are two sets
    { ...SPAN, 'switchboard.backend': 8080 },
  ];
  spans.forEach((span, i) => VALUES.forEach((v, j) => (i + j) % 3 !== 0 && p.record('server', v, span)));
  VALUES.forEach((v) => p.record('client', v, CLIENT_SPAN));
  p.record('client', 0.2, { ...CLIENT_SPAN, 'server.port': 443 });
  p.record('session', 12.5, { 'network.transport': 'tcp', 'network.protocol.name': 'http', 'mcp.protocol.version': '2025-11-25' });
  p.record('session', 700, { 'network.transport': 'tcp', 'network.protocol.name': 'http' });
  await assertSame(p, { from });
  // More records, some to sets seen before and some new: the second collection is cumulative.
  spans.forEach((span) => p.record('server', 0.07, span));
  p.record('server', 0.5, { ...SPAN, 'gen_ai.tool.name': 'new' });
  p.record('session', 3, { 'network.transport': 'tcp', 'network.protocol.name': 'http' });
  await assertSame(p, { from });
});

test('a negative value is dropped and NaN makes its set\'s point but counts nothing, as in the SDK', async () => {
  const from = Date.now();
  const p = pair();
  p.record('server', -1, SPAN);
  p.record('server', Number.NaN, { ...SPAN, 'gen_ai.tool.name': 'nan' });
  p.record('server', 0.3, SPAN);
  await assertSame(p, { from });
  const { ours } = await p.collect();
  const points = ours.resourceMetrics.scopeMetrics[0]!.metrics[0]!.dataPoints as Array<{ value: { count: number; min?: number } }>;
  assert.deepEqual(points.map((x) => [x.value.count, x.value.min]), [[0, undefined], [1, 0.3]]);
});

test('beyond the cardinality limit, further sets share one otel.metric.overflow=true point, as in the SDK', async () => {
  const from = Date.now();
  const p = pair(5);
  for (let i = 0; i < 9; i++) p.record('server', 0.01 * i, { ...SPAN, 'gen_ai.tool.name': `tool-${i}` });
  p.record('server', 1, { ...SPAN, 'gen_ai.tool.name': 'tool-0' }); // a set that has its own cell keeps it
  await assertSame(p, { from });
  const { ours } = await p.collect();
  const points = ours.resourceMetrics.scopeMetrics[0]!.metrics[0]!.dataPoints as Array<{ attributes: Attributes; value: { count: number } }>;
  assert.equal(points.length, 5);
  assert.deepEqual(points.at(-1)!.attributes, { 'otel.metric.overflow': true });
  assert.equal(points.at(-1)!.value.count, 5);
});

test('overflow is told once, and a full histogram adds no cell for a new set', () => {
  let told = 0;
  const h = new DurationHistogram({ ...SERVER, keys: METRIC_KEYS, slots: METRIC_SLOTS, boundaries: MCP_DURATION_BUCKETS, cardinalityLimit: 3, onOverflow: () => told++ });
  for (let i = 0; i < 100; i++) h.record(0.1, SpanAttributes.of({ ...SPAN, 'gen_ai.tool.name': `t${i}` }).values);
  const metric = h.collect([0, 0])!;
  assert.equal(told, 1);
  assert.equal(metric.dataPoints.length, 3);
  assert.deepEqual(metric.dataPoints.map((x) => x.value.count), [1, 1, 98]);
});

test('the cell of the record before is reused only for the same values: an array reused with others, NaN, 0 and -0', () => {
  const h = new DurationHistogram({ ...SERVER, keys: ['a', 'b'], boundaries: MCP_DURATION_BUCKETS });
  const reused: Array<string | number | undefined> = ['x', 'y'];
  h.record(0.1, reused);
  reused[1] = 'z';
  h.record(0.1, reused);
  h.record(0.1, ['x', 'y']);
  h.record(0.1, ['x', 'y']);
  h.record(0.1, ['x', undefined]);
  h.record(0.1, ['n', Number.NaN]);
  h.record(0.1, ['n', Number.NaN]);
  h.record(0.1, ['n', 0]);
  h.record(0.1, ['n', -0]);
  const counts = h.collect([0, 0])!.dataPoints.map((p) => [p.attributes, p.value.count]);
  assert.deepEqual(counts, [
    [{ a: 'x', b: 'y' }, 3],
    [{ a: 'x', b: 'z' }, 1],
    [{ a: 'x' }, 1],
    [{ a: 'n', b: Number.NaN }, 2],
    [{ a: 'n', b: 0 }, 2],
  ]);
});
