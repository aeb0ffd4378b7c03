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
import type { EncodableSpan } from './recorded-span.js';
import { jsonNumber, jsonString, keyValues, nanosString } from './otlp-json-values.js';
import { Utf8BatchWriter } from './utf8-batch-writer.js';

const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

/** The request as one string (for tests and the bench; the exporter writes it as bytes, {@link OtlpJsonTraceSerializer}). */
export function traceRequestJson(spans: readonly EncodableSpan[]): string {
  const parts: string[] = [];
  writeTraceRequest(spans, (text) => parts.push(text));
  return parts.join('');
}

/**
 * The request's text, handed to `emit` in pieces, each small: a span, or a group's opening or
 * closing (utf8-batch-writer.ts says why not one string). In order, they are the request.
 */
export function writeTraceRequest(spans: readonly EncodableSpan[], emit: (text: string) => void): void {
  emit('{"resourceSpans":[');
  let firstResource = true;
  for (const [resource, scopes] of grouped(spans)) {
    const schemaUrl = resource.schemaUrl ? `,"schemaUrl":${jsonString(resource.schemaUrl)}` : '';
    emit(`${firstResource ? '' : ','}{"resource":{"attributes":${keyValues(resource.attributes)},"droppedAttributesCount":0${schemaUrl}},"scopeSpans":[`);
    firstResource = false;
    let firstScope = true;
    for (const group of scopes.values()) {
      scopeSpans(group, firstScope ? '' : ',', emit);
      firstScope = false;
    }
    emit(`]${schemaUrl}}`);
  }
  emit(']}');
}

type Resource = EncodableSpan['resource'];

/** Spans by resource (the object), then by scope; each in the order first seen. */
function grouped(spans: readonly EncodableSpan[]): Map<Resource, Map<string, EncodableSpan[]>> {
  const resources = new Map<Resource, Map<string, EncodableSpan[]>>();
  // The group of the span before: the next span, of the same resource and scope object (every span of the gateway's), joins it at once.
  let last: { resource: Resource; scope: EncodableSpan['instrumentationScope']; group: EncodableSpan[] } | undefined;
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

/** One `ScopeSpans`, after `separator`: the scope of its first span, the spans, the scope's schema URL. */
function scopeSpans(group: readonly EncodableSpan[], separator: string, emit: (text: string) => void): void {
  const scope = group[0]!.instrumentationScope;
  let opening = `${separator}{"scope":{"name":${jsonString(scope.name)}`;
  if (scope.version !== undefined) opening += `,"version":${jsonString(scope.version)}`;
  const { attributes, droppedAttributesCount } = scope as { attributes?: Record<string, unknown>; droppedAttributesCount?: number };
  if (attributes && Object.keys(attributes).length > 0) opening += `,"attributes":${keyValues(attributes)},"droppedAttributesCount":${jsonNumber(droppedAttributesCount ?? 0)}`;
  emit(`${opening}},"spans":[`);
  for (let i = 0; i < group.length; i++) emit((i ? ',' : '') + span(group[i]!));
  emit(scope.schemaUrl === undefined ? ']}' : `],"schemaUrl":${jsonString(scope.schemaUrl)}}`);
}

/** One `Span`. */
function span(s: EncodableSpan): string {
  const context = s.spanContext();
  const parent = s.parentSpanContext;
  let out = `{"traceId":${jsonString(context.traceId)},"spanId":${jsonString(context.spanId)}`;
  if (parent?.spanId) out += `,"parentSpanId":${jsonString(parent.spanId)}`;
  out += traceState(context);
  out += `,"name":${jsonString(s.name)},"kind":${s.kind == null ? 0 : s.kind + 1}`;
  out += `,"startTimeUnixNano":${nanosString(s.startTime)},"endTimeUnixNano":${nanosString(s.endTime)}`;
  out += `,"attributes":${keyValues(s.attributes)},"droppedAttributesCount":${jsonNumber(s.droppedAttributesCount)}`;
  out += ',"events":[';
  for (let i = 0; i < s.events.length; i++) out += (i ? ',' : '') + event(s.events[i]!);
  out += `],"droppedEventsCount":${jsonNumber(s.droppedEventsCount)},"status":{"code":${jsonNumber(s.status.code)}`;
  if (s.status.message !== undefined) out += `,"message":${jsonString(s.status.message)}`;
  out += '},"links":[';
  for (let i = 0; i < s.links.length; i++) out += (i ? ',' : '') + link(s.links[i]!);
  return `${out}],"droppedLinksCount":${jsonNumber(s.droppedLinksCount)},"flags":${flags(context.traceFlags, parent?.isRemote)}}`;
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
    writeTraceRequest(spans, (text) => writer.write(text));
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
