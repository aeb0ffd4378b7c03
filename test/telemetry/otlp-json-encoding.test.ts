/**
 * The gateway's OTLP/JSON span encoder (src/telemetry/otlp-json-spans.ts, issue 44 part 1) against
 * the SDK's own (`JsonTraceSerializer` of @opentelemetry/otlp-transformer, imported here only):
 * spans made by the real SDK TracerProvider — every attribute value type, arrays, empty and
 * unicode strings, characters JSON must escape, events with attributes, links, an error status
 * with its message, remote and local parents, trace state, several resources and scopes, dropped
 * counts — encode to the same document once parsed. Written span by span into requests, as the
 * span queue writes them (src/telemetry/otlp-json-batch.ts), each request is the SDK serializer's
 * very text for its spans. And the exporter posts exactly that text, request after request, from
 * the buffers they reuse.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { TracerProvider, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { traceRequestJson, OtlpJsonTraceSerializer } from '../../src/telemetry/otlp-json-spans.js';
import { jsonString, keyValues, nanosString, writeNanos } from '../../src/telemetry/otlp-json-values.js';
import { OtlpJsonTraceExporter } from '../../src/telemetry/otlp-trace-exporter.js';
import { TraceRequestBatch } from '../../src/telemetry/otlp-json-batch.js';
import { RequestBuffers, Utf8BatchWriter } from '../../src/ops/utf8-batch-writer.js';

const TRICKY = ['', 'plain', 'quote " and \\ backslash', 'controls \u0000\u0001\b\f\n\r\t\u001f\u007f', 'unicode é ü 日本語 🚀', 'lone surrogates \ud800 x \udfff', '\u2028\u2029 </script>', 'emoji pair \ud83d\ude80 then lone \ud83d'];

const ATTRIBUTES: Attributes = {
  'str': 'value', 'str.empty': '', 'str.escape': TRICKY[2], 'str.controls': TRICKY[3], 'str.unicode': TRICKY[4], 'str.surrogate': TRICKY[5],
  'int': 42, 'int.negative': -7, 'int.zero': 0, 'int.negzero': -0, 'int.big': Number.MAX_SAFE_INTEGER, 'double': 3.25, 'double.tiny': 1e-300, 'double.huge': 1.5e300, 'double.nan': Number.NaN, 'double.inf': Number.POSITIVE_INFINITY,
  'bool.true': true, 'bool.false': false,
  'arr.str': ['a', '', 'ü"\\'], 'arr.int': [1, 2, -3], 'arr.double': [1.5, 2.25], 'arr.bool': [true, false], 'arr.empty': [], 'arr.holes': ['a', null, undefined, 'b'],
  'key "quoted" \\ é\n': 'k',
};

/** A provider whose ended spans are kept, with its own resource. */
function keeping(resource: ReturnType<typeof resourceFromAttributes>, kept: ReadableSpan[], limits?: ConstructorParameters<typeof TracerProvider>[0]) {
  const processor: SpanProcessor = { onStart: () => {}, onEnd: (s) => void kept.push(s), forceFlush: async () => {}, shutdown: async () => {} };
  return new TracerProvider({ resource, spanProcessors: [processor], ...limits });
}

/** A varied batch: two resources (one with a schema URL), three scopes, spans of every kind. */
function variedSpans(): ReadableSpan[] {
  const kept: ReadableSpan[] = [];
  const a = keeping(resourceFromAttributes({ 'service.name': 'switchboard', 'service.version': '1.2.3', 'service.instance.id': 'ïd "x"', 'host.cpus': 2, 'arr': ['x', 'y'] }), kept);
  const b = keeping(resourceFromAttributes({ 'service.name': 'other' }, { schemaUrl: 'https://opentelemetry.io/schemas/1.30.0' }), kept, {
    spanLimits: { attributeCountLimit: 3, eventCountLimit: 1, linkCountLimit: 1, attributePerEventCountLimit: 1, attributePerLinkCountLimit: 1, attributeValueLengthLimit: 4 },
  });
  const remoteParent = trace.setSpanContext(ROOT_CONTEXT, { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('vendor=a,other=b"') });
  const linked = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.NONE, isRemote: true, traceState: new TraceState('k=v') };
  const localLinked = { traceId: '0af7651916cd43dd8448eb211c80319d', spanId: 'b7ad6b7169203332', traceFlags: TraceFlags.SAMPLED };

  const gateway = a.getTracer('switchboard', '9.9.9');
  const server = gateway.startSpan('tools/call echo', { kind: SpanKind.SERVER, attributes: ATTRIBUTES, links: [{ context: linked, attributes: { 'link.attr': 'ü', 'n': 1 } }, { context: localLinked }] }, remoteParent);
  server.addEvent('event with attributes', { 'e.str': TRICKY[6], 'e.arr': [1, 2], 'e.bool': false });
  server.addEvent('event without');
  server.addEvent(TRICKY[7]!, { x: 1.5 }, [1_700_000_000, 5]);
  server.setStatus({ code: SpanStatusCode.ERROR, message: 'failed: "quoted" \n é' });
  const client = gateway.startSpan('tools/call echo', { kind: SpanKind.CLIENT, attributes: { 'server.port': 8080 } }, trace.setSpan(ROOT_CONTEXT, server));
  client.setStatus({ code: SpanStatusCode.OK });
  client.end();
  server.end();
  for (const kind of [SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER]) gateway.startSpan(`kind ${kind}`, { kind, startTime: [1, 0] }).end([1, 999_999_999]);
  a.getTracer('no-version').startSpan('', { attributes: {} }).end();
  a.getTracer('scoped', '1', { schemaUrl: 'https://example.com/schema' }).startSpan('scoped span').end();
  gateway.startSpan('same scope again, after another scope').end();

  // Limits: attributes, events, links and their attributes dropped; long strings cut.
  const limited = b.getTracer('limited').startSpan('limited', { attributes: { a: 'abcdefgh', b: ['long string', 'x'], c: 3, d: 4, e: 5 }, links: [{ context: linked, attributes: { p: 1, q: 2 } }, { context: localLinked }] });
  limited.addEvent('first', { p: 1, q: 2, r: 3 });
  limited.addEvent('second');
  limited.setStatus({ code: SpanStatusCode.ERROR });
  limited.end();
  return kept;
}

/** The spans written into requests as the span queue writes them: a new request wherever the resource or the scope changes. */
function requestsOf(spans: readonly ReadableSpan[], buffers = new RequestBuffers()): Array<{ batch: TraceRequestBatch; spans: ReadableSpan[] }> {
  const requests: Array<{ batch: TraceRequestBatch; spans: ReadableSpan[] }> = [];
  for (const span of spans) {
    let last = requests.at(-1);
    if (!last?.batch.takes(span)) {
      last?.batch.close();
      requests.push((last = { batch: new TraceRequestBatch(span, buffers), spans: [] }));
    }
    last.batch.add(span);
    last.spans.push(span);
  }
  return requests;
}

const sdkText = (spans: ReadableSpan[]) => new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)!);

const parsedSdk = (spans: ReadableSpan[]) => JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)!)) as unknown;
const parsedOurs = (spans: ReadableSpan[]) => JSON.parse(Buffer.from(OtlpJsonTraceSerializer.serializeRequest(spans)!).toString('utf8')) as unknown;

test('a varied batch of real SDK spans: our document is the SDK serializer\'s, field for field', () => {
  const spans = variedSpans();
  assert.ok(spans.length >= 9);
  const limited = spans.find((s) => s.name === 'limited')!;
  assert.ok(limited.droppedAttributesCount > 0 && limited.droppedEventsCount > 0 && limited.droppedLinksCount > 0, 'the limits dropped something');
  assert.deepStrictEqual(parsedOurs(spans), parsedSdk(spans));
  const doc = parsedOurs(spans) as { resourceSpans: Array<{ scopeSpans: unknown[] }> };
  assert.equal(doc.resourceSpans.length, 2);
  assert.equal(doc.resourceSpans[0]!.scopeSpans.length, 3);
  // Written in the SDK's field order too: the very same text.
  assert.equal(Buffer.from(OtlpJsonTraceSerializer.serializeRequest(spans)!).toString('utf8'), new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans)!));
});

test('written span by span into requests, as the queue writes them: each request is the SDK serializer\'s text for its spans', () => {
  const spans = variedSpans();
  const buffers = new RequestBuffers();
  const requests = requestsOf(spans, buffers);
  assert.ok(requests.length >= 4, 'the varied spans change resource or scope several times');
  assert.equal(requests.reduce((n, r) => n + r.batch.count, 0), spans.length);
  for (const [i, r] of requests.entries()) assert.equal(r.batch.bytes().toString('utf8'), sdkText(r.spans), `request ${i}`);
  // Released and written again: a short request in a long one's buffer holds only its own bytes.
  for (const r of requests) r.batch.release();
  const again = requestsOf([spans.at(-1)!], buffers);
  assert.equal(again[0]!.batch.bytes().toString('utf8'), sdkText([spans.at(-1)!]));
  // A closed request takes no more spans.
  assert.equal(again[0]!.batch.takes(spans.at(-1)!), false);
});

test('each span alone, and in the reverse order (grouping follows first appearance)', () => {
  const spans = variedSpans();
  for (const s of spans) assert.deepStrictEqual(parsedOurs([s]), parsedSdk([s]), s.name);
  const reversed = [...spans].reverse();
  assert.deepStrictEqual(parsedOurs(reversed), parsedSdk(reversed));
});

test('an empty batch', () => {
  assert.deepStrictEqual(parsedOurs([]), parsedSdk([]));
  assert.equal(traceRequestJson([]), '{"resourceSpans":[]}');
});

test('strings are written exactly as JSON.stringify writes them, lone surrogates included', () => {
  for (const s of [...TRICKY, '"', '\\', '\u001f', '\ud800', '\udc00', 'a\ud83d\ude80b']) assert.equal(jsonString(s), JSON.stringify(s), JSON.stringify(s));
  for (let c = 0; c < 0x10000; c += 7) {
    const s = `x${String.fromCharCode(c)}y`;
    assert.equal(jsonString(s), JSON.stringify(s));
  }
});

test('times are exact decimal nanoseconds, as BigInt computes them', () => {
  const cases: Array<[number, number]> = [[1_700_000_000, 0], [1_700_000_000, 5], [1_700_000_000, 999_999_999], [1, 1], [0, 0], [0, 123], [4_102_444_800, 1_000]];
  for (let i = 0; i < 1000; i++) cases.push([Math.floor(Math.random() * 4e9), Math.floor(Math.random() * 1e9)]);
  for (const [s, ns] of cases) assert.equal(nanosString([s, ns]), `"${BigInt(s) * 1_000_000_000n + BigInt(ns)}"`, `${s},${ns}`);
  // Written in pieces into a request, the same digits (the out-of-range ones through BigInt too).
  for (const [s, ns] of [...cases, [1e15, 7], [-1, 5]] as Array<[number, number]>) {
    const w = new Utf8BatchWriter(Buffer.alloc(8));
    writeNanos([s, ns], w);
    assert.equal(w.view().toString('utf8'), nanosString([s, ns]), `${s},${ns} written`);
  }
});

test('the batch writer writes every string as JSON.stringify does, short ones copied and long ones by Buffer.write', () => {
  // Each tricky piece alone, and padded past the length where the writer stops copying it
  // character by character, so both ways meet quotes, controls, non-ASCII and surrogates.
  const pieces = TRICKY.flatMap((t) => [t, `${'p'.repeat(30)}${t}`, `${t}${'é'.repeat(40)}`, `${'h'.repeat(200)}${t}`]);
  const w = new Utf8BatchWriter(Buffer.alloc(16));
  const expected: string[] = [];
  for (const piece of pieces) {
    w.jsonString(piece);
    w.write(piece);
    expected.push(JSON.stringify(piece), piece);
  }
  // As bytes: a lone surrogate written raw is UTF-8's replacement character either way.
  assert.deepEqual(w.view(), Buffer.from(expected.join(''), 'utf8'));
  // `quoted` takes a long string with nothing to escape, non-ASCII included, and refuses one with an escape.
  const q = new Utf8BatchWriter(Buffer.alloc(4));
  assert.equal(q.quoted(`${'ü'.repeat(30)} 日本語`), true);
  assert.equal(q.quoted(`${'x'.repeat(30)}"`), false);
  assert.equal(q.quoted(`${'x'.repeat(30)}\ud800`), false);
  assert.equal(q.view().toString('utf8'), JSON.stringify(`${'ü'.repeat(30)} 日本語`));
  // Integers' digits written straight into the buffer, padded; anything else as String(n).
  const cases: Array<[number, number | undefined, string]> = [
    [0, undefined, '0'], [7, undefined, '7'], [10, undefined, '10'], [1764475200, undefined, '1764475200'], [Number.MAX_SAFE_INTEGER, undefined, String(Number.MAX_SAFE_INTEGER)],
    [5, 9, '000000005'], [999999999, 9, '999999999'], [123, 2, '123'], [0, 3, '000'], [1e9, 12, '001000000000'], [1000000005, undefined, '1000000005'], [4_294_967_296_000, undefined, '4294967296000'],
    [-1, undefined, '-1'], [1.5, undefined, '1.5'], [2 ** 53, undefined, String(2 ** 53)], [Number.NaN, undefined, 'NaN'],
  ];
  const d = new Utf8BatchWriter(Buffer.alloc(2));
  for (const [n, width, text] of cases) {
    const at = d.length;
    d.integer(n, width);
    assert.equal(d.view().subarray(at).toString('utf8'), text, `${n} to ${width ?? 1} digits`);
  }
});

test('the collector\'s answer: empty, a partial success, or unreadable', () => {
  assert.deepStrictEqual(OtlpJsonTraceSerializer.deserializeResponse(new Uint8Array()), {});
  const partial = { partialSuccess: { rejectedSpans: 2, errorMessage: 'x' } };
  assert.deepStrictEqual(OtlpJsonTraceSerializer.deserializeResponse(new TextEncoder().encode(JSON.stringify(partial))), JsonTraceSerializer.deserializeResponse(new TextEncoder().encode(JSON.stringify(partial))));
  assert.deepStrictEqual(OtlpJsonTraceSerializer.deserializeResponse(new TextEncoder().encode('not json')), {});
});

test('the exporter posts the SDK serializer\'s text, request after request from reused buffers, gzip too', async () => {
  const bodies: Array<{ type?: string; encoding?: string; text: string }> = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      bodies.push({ type: req.headers['content-type'], encoding: req.headers['content-encoding'], text: (req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/traces`;
    const spans = variedSpans();
    // Big, then small (a reused buffer's old bytes must not leak past the new body), then big again.
    const slices = [spans, spans.slice(0, 1), spans.slice(2), spans.slice(0, 1)];
    const sent: string[] = [];
    for (const compression of ['none', 'gzip'] as const) {
      const exporter = new OtlpJsonTraceExporter({ url, compression: compression as never, headers: { 'x-test': '1' } });
      const buffers = new RequestBuffers();
      for (const slice of slices) {
        for (const request of requestsOf(slice, buffers)) {
          const result = await new Promise<ExportResult>((resolve) => exporter.export(request.batch, resolve));
          assert.equal(result.code, ExportResultCode.SUCCESS);
          sent.push(sdkText(request.spans));
        }
      }
      await exporter.shutdown();
    }
    assert.equal(bodies.length, sent.length);
    bodies.forEach((body, i) => {
      assert.equal(body.type, 'application/json');
      assert.equal(body.encoding, i < sent.length / 2 ? undefined : 'gzip');
      assert.equal(body.text, sent[i], `post ${i}`);
    });
  } finally {
    server.close();
  }
});

test('string attributes written from the encodings kept per key read back as given: repeated, past the kept share, long, escaped', () => {
  const expected = (attributes: Record<string, string | number>) =>
    Object.entries(attributes).map(([key, v]) => ({ key, value: typeof v === 'string' ? { stringValue: v } : { intValue: v } }));
  // 200 distinct values of one key (its kept share is 64), each seen twice; values over the kept length; every tricky string.
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 200; i++) {
      const attributes = { 'cache.key': `value ${i}`, 'cache.long': 'x'.repeat(250 + i), 'cache.tricky': TRICKY[i % TRICKY.length]!, 'cache.number': i };
      assert.deepEqual(JSON.parse(keyValues(attributes)), expected(attributes), `round ${round}, value ${i}`);
    }
  }
});
