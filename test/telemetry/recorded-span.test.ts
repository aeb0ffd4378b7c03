/**
 * src/telemetry/recorded-span.ts: the gateway's own span record (issue 44 part 1) must export
 * as the SDK's span would. For the same inputs — parent, ids, attributes, links, status and
 * clock readings — the SDK's `TracerProvider` (ParentBasedSampler, as the gateway samples) makes
 * a span, and the gateway a RecordedSpan; the SDK's own `JsonTraceSerializer` must write the same
 * document for both, and so must the gateway's encoder.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Link, type SpanContext } from '@opentelemetry/api';
import { addHrTimes, millisToHrTime, TraceState } from '@opentelemetry/core';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, ParentBasedSampler, TracerProvider, type IdGenerator, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { traceRequestJson } from '../../src/telemetry/otlp-json-spans.js';
import { SpanAttributes } from '../../src/telemetry/span-attributes.js';
import { epochNanos, epochSeconds, RecordedSpan, type EncodableSpan } from '../../src/telemetry/recorded-span.js';

const resource = resourceFromAttributes({ 'service.name': 'switchboard', 'service.instance.id': 'one' });
const scope = { name: 'switchboard', version: '1.0.0' };

/** An id generator that hands out the ids given, so the SDK's span gets the ids the record has. */
class FixedIds implements IdGenerator {
  constructor(private readonly traceId: string, private readonly spanId: string) {}
  generateTraceId = () => this.traceId;
  generateSpanId = () => this.spanId;
}

function sdkSpan(p: { parent?: SpanContext; traceId: string; spanId: string; kind: SpanKind; attributes: Record<string, string | number | boolean>; links?: Link[]; startMs: number; endMs: number; error?: string | null }): ReadableSpan {
  const kept: ReadableSpan[] = [];
  const processor: SpanProcessor = { onStart: () => {}, onEnd: (s) => void kept.push(s), forceFlush: async () => {}, shutdown: async () => {} };
  const provider = new TracerProvider({ resource, sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), idGenerator: new FixedIds(p.traceId, p.spanId), spanProcessors: [processor] });
  const parent = p.parent ? trace.setSpanContext(ROOT_CONTEXT, p.parent) : ROOT_CONTEXT;
  const epoch = (ms: number) => addHrTimes(millisToHrTime(performance.timeOrigin), millisToHrTime(ms));
  const span = provider.getTracer(scope.name, scope.version).startSpan('tools/call echo', { kind: p.kind, attributes: p.attributes, links: p.links, startTime: epoch(p.startMs) }, parent);
  if (p.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: p.error ?? undefined });
  span.end(epoch(p.endMs));
  return kept[0]!;
}

const sdkDocument = (spans: EncodableSpan[]) => JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans as ReadableSpan[])!)) as unknown;

const remoteParent: SpanContext = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('vendor=a') };
const localParent: SpanContext = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '1111111111111111', traceFlags: TraceFlags.SAMPLED };
const linked: SpanContext = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.NONE, isRemote: true };

const cases = [
  { what: 'a SERVER child of a remote parent, with a link and an error status', parent: remoteParent, kind: SpanKind.SERVER, links: [{ context: linked }], error: 'tool "echo" failed\n é' },
  { what: 'a CLIENT child of a local parent, no status', parent: localParent, kind: SpanKind.CLIENT },
  { what: 'a root SERVER span, ERROR without a message', kind: SpanKind.SERVER, error: null },
] as const;

for (const c of cases) {
  test(`${c.what}: the SDK serializer writes the same document for the record as for the SDK's span`, () => {
    const parent = 'parent' in c ? c.parent : undefined;
    const traceId = parent?.traceId ?? '5b8efff798038103d269b633813fc60c';
    const spanId = 'eee19b7ec3c1b174';
    // In the layout's order (span-attributes.ts), which the SDK's serializer keeps for its object.
    const attributes = { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'client.port': 51234, 'switchboard.backend': 'crm' };
    const links = 'links' in c ? [...c.links] : undefined;
    const error = 'error' in c ? c.error : undefined;
    const startMs = 1234.5678;
    const endMs = 1240.0625;
    const sdk = sdkSpan({ parent, traceId, spanId, kind: c.kind, attributes, links, startMs, endMs, error });

    const context: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, traceState: parent?.traceState };
    const recorded = new RecordedSpan({ resource, instrumentationScope: scope }, 'tools/call echo', c.kind, context, parent, SpanAttributes.of(attributes), links, startMs);
    if (error !== undefined) recorded.failed(error ?? undefined);
    recorded.ended(endMs);

    assert.deepEqual(sdkDocument([recorded]), sdkDocument([sdk]));
    assert.deepEqual(JSON.parse(traceRequestJson([recorded])), sdkDocument([sdk]), 'and the gateway encoder writes it too');
  });
}

test('the record keeps the attributes it was given (shared with the histogram), not a copy', () => {
  const attributes = SpanAttributes.of({ 'mcp.method.name': 'ping' });
  const recorded = new RecordedSpan({ resource, instrumentationScope: scope }, 'ping', SpanKind.SERVER, localParent, undefined, attributes, undefined, 1);
  attributes.set('error.type', '-32601');
  assert.equal(recorded.attributes['error.type'], '-32601');
  assert.deepEqual(JSON.parse(traceRequestJson([recorded])).resourceSpans[0].scopeSpans[0].spans[0].attributes, [
    { key: 'mcp.method.name', value: { stringValue: 'ping' } },
    { key: 'error.type', value: { stringValue: '-32601' } },
  ]);
  assert.equal(recorded.status.code, SpanStatusCode.UNSET);
});

test('a time written from its clock reading is the SDK\'s HrTime of it, part for part, at every carry past a second', () => {
  const origin = millisToHrTime(performance.timeOrigin);
  // Readings whose nanoseconds, added to the origin's, fall just under, at and over a second; and a spread of others.
  const carry = (1e9 - origin[1]) / 1e6;
  const readings = [0, 0.000001, 0.5, 999.999999, 1000, 1234.5678, 86_400_000.123456, carry - 0.000001, carry, carry + 0.000001, carry + 1000];
  for (let i = 0; i < 2000; i++) readings.push(i * 1.618033 + (i % 7) * 0.000137);
  for (const ms of readings) assert.deepEqual([epochSeconds(ms), epochNanos(ms)], addHrTimes(origin, millisToHrTime(ms)), `reading ${ms}`);
});
