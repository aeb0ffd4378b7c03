/**
 * An OTLP/JSON trace export request written straight from ended spans — the gateway's own
 * (recorded-span.ts) or the SDK's, which have the same fields (`EncodableSpan`) — (issue 44 part
 * 1). The SDK's `JsonTraceSerializer` first turns each span into the request's object tree, then
 * `JSON.stringify`s it, then encodes that string as UTF-8: on this machine 13.6 µs of CPU per
 * span of a gateway SERVER span's 18 µs end to end (bench/otel-floor.ts). This one walks the
 * spans once and writes each span's text, as UTF-8 at once (utf8-batch-writer.ts).
 *
 * The document is an `ExportTraceServiceRequest` (opentelemetry/proto/collector/trace/v1/
 * trace_service.proto; messages of opentelemetry/proto/trace/v1/trace.proto) in the OTLP
 * specification's JSON encoding (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding):
 * trace and span ids as hex, `kind` and `status.code` as integers, times as decimal strings of
 * nanoseconds. It is the SDK serializer's document field for field (test/telemetry/
 * otlp-json-encoding.test.ts parses both and compares them), including its choices:
 * - spans grouped by their `Resource` object, then by instrumentation scope name, version and
 *   schema URL, each group in the order first seen (a batch has one resource and one scope);
 * - `kind` is the API's `SpanKind` + 1 (the proto's 0 is UNSPECIFIED);
 * - `flags`: the W3C trace flags with SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE (0x100), and
 *   SPAN_FLAGS_CONTEXT_IS_REMOTE (0x200) when the parent (of a span) or the linked context (of
 *   a link) is remote;
 * - a resource's `droppedAttributesCount` is 0; a scope carries attributes only when it has any.
 * The value encodings are in otlp-json-values.ts.
 */
import { diag, type Link, type SpanContext } from '@opentelemetry/api';
import type { IExportTraceServiceResponse, ISerializer } from '@opentelemetry/otlp-transformer';
import type { TimedEvent } from '@opentelemetry/sdk-trace';
import { epochNanos, epochSeconds, RecordedSpan, type EncodableSpan } from './recorded-span.js';
import { jsonNumber, jsonString, keyValues, nanosString, TimeMember, writeKeyValues, writeNumber, writeSpanAttributes } from './otlp-json-values.js';
import { KeptEncodings } from '../ops/kept-encodings.js';
import { Utf8BatchWriter } from '../ops/utf8-batch-writer.js';

const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

/** The request as one string (for tests and the bench; the exporter writes it as bytes, {@link OtlpJsonTraceSerializer}). */
export function traceRequestJson(spans: readonly EncodableSpan[]): string {
  const writer = new Utf8BatchWriter();
  writeTraceRequest(spans, writer);
  return writer.view().toString('utf8');
}

/** The whole request for `spans`, grouped as the SDK's serializer groups them, written into `w`. */
export function writeTraceRequest(spans: readonly EncodableSpan[], w: Utf8BatchWriter): void {
  w.write('{"resourceSpans":[');
  let firstResource = true;
  for (const [resource, scopes] of grouped(spans)) {
    w.write(`${firstResource ? '' : ','}${resourceOpening(resource)}`);
    firstResource = false;
    let firstScope = true;
    for (const group of scopes.values()) {
      w.write(`${firstScope ? '' : ','}${scopeOpening(group[0]!.instrumentationScope)}`);
      firstScope = false;
      for (let i = 0; i < group.length; i++) {
        if (i) w.write(',');
        writeSpan(group[i]!, w);
      }
      w.write(scopeClosing(group[0]!.instrumentationScope));
    }
    w.write(resourceClosing(resource));
  }
  w.write(']}');
}

export type Resource = EncodableSpan['resource'];
export type Scope = EncodableSpan['instrumentationScope'];

/** A `ResourceSpans` up to its first `ScopeSpans`: `{"resource":{…},"scopeSpans":[`. */
export function resourceOpening(resource: Resource): string {
  return `{"resource":{"attributes":${keyValues(resource.attributes)},"droppedAttributesCount":0${schemaUrlOf(resource)}},"scopeSpans":[`;
}

/** What closes a `ResourceSpans` ({@link resourceOpening}). */
export function resourceClosing(resource: Resource): string {
  return `]${schemaUrlOf(resource)}}`;
}

function schemaUrlOf(resource: Resource): string {
  return resource.schemaUrl ? `,"schemaUrl":${jsonString(resource.schemaUrl)}` : '';
}

/** A `ScopeSpans` up to its first span: `{"scope":{…},"spans":[`. */
export function scopeOpening(scope: Scope): string {
  let opening = `{"scope":{"name":${jsonString(scope.name)}`;
  if (scope.version !== undefined) opening += `,"version":${jsonString(scope.version)}`;
  const { attributes, droppedAttributesCount } = scope as { attributes?: Record<string, unknown>; droppedAttributesCount?: number };
  if (attributes && Object.keys(attributes).length > 0) opening += `,"attributes":${keyValues(attributes)},"droppedAttributesCount":${jsonNumber(droppedAttributesCount ?? 0)}`;
  return `${opening}},"spans":[`;
}

/** What closes a `ScopeSpans` ({@link scopeOpening}). */
export function scopeClosing(scope: Scope): string {
  return scope.schemaUrl === undefined ? ']}' : `],"schemaUrl":${jsonString(scope.schemaUrl)}}`;
}

/** Spans by resource (the object), then by scope; each in the order first seen. */
function grouped(spans: readonly EncodableSpan[]): Map<Resource, Map<string, EncodableSpan[]>> {
  const resources = new Map<Resource, Map<string, EncodableSpan[]>>();
  // The group of the span before: the next span, of the same resource and scope object (every span of the gateway's), joins it at once.
  let last: { resource: Resource; scope: Scope; group: EncodableSpan[] } | undefined;
  for (const span of spans) {
    const scope = span.instrumentationScope;
    if (last && last.resource === span.resource && last.scope === scope) {
      last.group.push(span);
      continue;
    }
    let scopes = resources.get(span.resource);
    if (!scopes) resources.set(span.resource, (scopes = new Map()));
    const key = `${scope.name}@${scope.version || ''}:${scope.schemaUrl || ''}`;
    let group = scopes.get(key);
    if (group) group.push(span);
    else scopes.set(key, (group = [span]));
    last = { resource: span.resource, scope, group };
  }
  return resources;
}

/** The constant pieces of a span's text, encoded once (copied as bytes, not character by character). */
const PIECE = {
  traceId: Buffer.from('{"traceId":'),
  spanId: Buffer.from(',"spanId":'),
  parentSpanId: Buffer.from(',"parentSpanId":'),
  traceState: Buffer.from(',"traceState":'),
  attributes: Buffer.from(',"attributes":'),
  droppedAttributes: Buffer.from(',"droppedAttributesCount":'),
  events: Buffer.from(',"events":['),
  droppedEvents: Buffer.from('],"droppedEventsCount":'),
  status: Buffer.from(',"status":{"code":'),
  /** What follows the attributes when nothing was dropped and there are no events (every gateway span). */
  noEvents: Buffer.from(',"droppedAttributesCount":0,"events":[],"droppedEventsCount":0,"status":{"code":'),
  message: Buffer.from(',"message":'),
  links: Buffer.from('},"links":['),
  droppedLinks: Buffer.from('],"droppedLinksCount":'),
  flags: Buffer.from(',"flags":'),
  /** What follows the status when there are no links and none was dropped (every gateway span but a SERVER span with a link). */
  noLinks: Buffer.from('},"links":[],"droppedLinksCount":0,"flags":'),
};

/**
 * One `Span`, written into `w` piece by piece: each piece is a constant or a value the span
 * already holds, so no string is joined only to be copied again (utf8-batch-writer.ts).
 */
export function writeSpan(s: EncodableSpan, w: Utf8BatchWriter): void {
  const context = s.spanContext();
  const parent = s.parentSpanContext;
  w.bytes(PIECE.traceId);
  w.jsonString(context.traceId);
  w.bytes(PIECE.spanId);
  w.jsonString(context.spanId);
  if (parent?.spanId) {
    w.bytes(PIECE.parentSpanId);
    w.jsonString(parent.spanId);
  }
  const state = context.traceState?.serialize();
  if (state !== undefined) {
    w.bytes(PIECE.traceState);
    w.jsonString(state);
  }
  SPAN_NAMES.write(s.name, w);
  const kind = s.kind == null ? 0 : s.kind + 1;
  const start = START_TIMES[kind] ?? new TimeMember(`,"kind":${jsonNumber(kind)},"startTimeUnixNano":`);
  if (s instanceof RecordedSpan) {
    // The gateway's own span: its times from its clock readings (no `HrTime` made), its
    // attributes from their layout, each key's encodings found by its slot.
    start.write(epochSeconds(s.startMilliseconds), epochNanos(s.startMilliseconds), w);
    END_TIME.write(epochSeconds(s.endMilliseconds), epochNanos(s.endMilliseconds), w);
    w.bytes(PIECE.attributes);
    writeSpanAttributes(s.own.values, w);
  } else {
    const startTime = s.startTime;
    const endTime = s.endTime;
    start.write(startTime[0], startTime[1], w);
    END_TIME.write(endTime[0], endTime[1], w);
    w.bytes(PIECE.attributes);
    writeKeyValues(s.attributes, w);
  }
  const spanFlags = flags(context.traceFlags, parent?.isRemote);
  const plain = s.droppedAttributesCount === 0 && s.events.length === 0 && s.droppedEventsCount === 0;
  if (plain && s.status.message === undefined && s.links.length === 0 && s.droppedLinksCount === 0) return writePlainEnd(s.status.code, spanFlags, w);
  if (plain) w.bytes(PIECE.noEvents);
  else {
    w.bytes(PIECE.droppedAttributes);
    writeNumber(s.droppedAttributesCount, w);
    w.bytes(PIECE.events);
    for (let i = 0; i < s.events.length; i++) w.write((i ? ',' : '') + event(s.events[i]!));
    w.bytes(PIECE.droppedEvents);
    writeNumber(s.droppedEventsCount, w);
    w.bytes(PIECE.status);
  }
  writeNumber(s.status.code, w);
  if (s.status.message !== undefined) {
    w.bytes(PIECE.message);
    w.jsonString(s.status.message);
  }
  if (s.links.length === 0 && s.droppedLinksCount === 0) w.bytes(PIECE.noLinks);
  else {
    w.bytes(PIECE.links);
    for (let i = 0; i < s.links.length; i++) w.write((i ? ',' : '') + link(s.links[i]!));
    w.bytes(PIECE.droppedLinks);
    writeNumber(s.droppedLinksCount, w);
    w.bytes(PIECE.flags);
  }
  w.integer(spanFlags);
  w.write('}');
}

/** Span names as they repeat (a method and its tool): `,"name":"tools/call echo"` kept as bytes (ops/kept-encodings.ts). */
const SPAN_NAMES = new KeptEncodings(',"name":', (name, w) => w.jsonString(name));

/** `,"kind":K,"startTimeUnixNano":` and the start time, for the proto's kinds 0–5 (UNSPECIFIED to CONSUMER), made once. */
const START_TIMES = [0, 1, 2, 3, 4, 5].map((kind) => new TimeMember(`,"kind":${kind},"startTimeUnixNano":`));
const END_TIME = new TimeMember(',"endTimeUnixNano":');

/**
 * The end of a span with no event, link, drop or status message — every gateway span but a
 * failed one's and a SERVER span with a link — by its status code and flags, made once per pair:
 * `,"droppedAttributesCount":0,…,"status":{"code":C},"links":[],"droppedLinksCount":0,"flags":F}`.
 */
const plainEnds = new Map<number, Buffer>();

function writePlainEnd(code: number, spanFlags: number, w: Utf8BatchWriter): void {
  // Status codes are 0–2: one integer for the pair (bounded: at most 64 pairs kept).
  const key = Number.isInteger(code) && code >= 0 && code < 8 ? spanFlags * 8 + code : -1;
  let end = key >= 0 ? plainEnds.get(key) : undefined;
  if (end === undefined) {
    end = Buffer.from(`${PIECE.noEvents.toString()}${jsonNumber(code)}${PIECE.noLinks.toString()}${spanFlags}}`);
    if (key >= 0 && plainEnds.size < 64) plainEnds.set(key, end);
  }
  w.bytes(end);
}

function traceState(context: SpanContext): string {
  const state = context.traceState?.serialize();
  return state === undefined ? '' : `,"traceState":${jsonString(state)}`;
}

/** The 32-bit `flags` of a span or link: W3C flags in the low byte, and whether the context is remote. */
function flags(traceFlags: number, isRemote: boolean | undefined): number {
  return (traceFlags & 0xff) | HAS_IS_REMOTE | (isRemote ? IS_REMOTE : 0);
}

/** One `Span.Event`. */
function event(e: TimedEvent): string {
  const attributes = e.attributes ? keyValues(e.attributes) : '[]';
  return `{"attributes":${attributes},"name":${jsonString(e.name)},"timeUnixNano":${nanosString(e.time)},"droppedAttributesCount":${jsonNumber(e.droppedAttributesCount || 0)}}`;
}

/** One `Span.Link`. */
function link(l: Link): string {
  const attributes = l.attributes ? keyValues(l.attributes) : '[]';
  const c = l.context;
  return `{"attributes":${attributes},"spanId":${jsonString(c.spanId)},"traceId":${jsonString(c.traceId)}${traceState(c)},"droppedAttributesCount":${jsonNumber(l.droppedAttributesCount || 0)},"flags":${flags(c.traceFlags, c.isRemote)}}`;
}

/**
 * A serializer as the SDK's OTLP/HTTP export delegate takes it: the request as UTF-8 bytes of
 * its own (the exporter's, otlp-trace-exporter.ts, writes into buffers it reuses); the
 * collector's answer (an `ExportTraceServiceResponse`, possibly empty) read as JSON, an
 * unreadable one as empty with a diagnostic warning — what the SDK's JSON serializer does.
 */
export const OtlpJsonTraceSerializer: ISerializer<EncodableSpan[], IExportTraceServiceResponse> = {
  serializeRequest: (spans) => {
    const writer = new Utf8BatchWriter();
    writeTraceRequest(spans, writer);
    return writer.copy();
  },
  deserializeResponse: (data) => {
    if (data.length === 0) return {};
    try {
      return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as IExportTraceServiceResponse;
    } catch (err) {
      diag.warn(`Failed to parse trace export response: ${(err as Error).message}. Returning empty response`);
      return {};
    }
  },
};
