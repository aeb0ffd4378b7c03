/**
 * The OpenTelemetry SDK behind `telemetry` (issue 30 §1), loaded only by a dynamic import from
 * telemetry.ts. No auto-instrumentation and no global registration: spans (parent-based ratio
 * sampling, bounded span queue, OTLP/HTTP exporter to `{endpoint}/v1/traces`),
 * one meter provider (OTLP/HTTP to `{endpoint}/v1/metrics`), W3C trace context and baggage,
 * and contexts passed by hand from the SERVER span to the CLIENT spans (the request carries it).
 *
 * Spans are the gateway's own records (recorded-span.ts), sampled as the SDK's
 * `ParentBasedSampler` over its `TraceIdRatioBasedSampler` samples (startSpan), queued and
 * exported by span-queue.ts and otlp-trace-exporter.ts; no `TracerProvider` is made.
 *
 * Spans and metrics follow `docs/gen-ai/mcp.md` of open-telemetry/semantic-conventions-genai:
 * - the SERVER span's parent is the context in the client's `params._meta` (the convention's
 *   carrier, SEP-414); the HTTP headers' context is its parent only when `_meta` has none, and
 *   a link when both are there and differ ("SHOULD link current ambient context");
 * - span status ERROR whenever `error.type` is set, described by the JSON-RPC error's message;
 * - `mcp.server.operation.duration`, `mcp.client.operation.duration` and
 *   `mcp.server.session.duration` in seconds, with the convention's ExplicitBucketBoundaries
 *   as instrument advice: histograms of our own (duration-histogram.ts, no attribute set hashed
 *   per record; issue 44), exported by the SDK's reader through a MetricProducer (metric-producer.ts).
 */
// The module's `performance`, not the global one: `globalThis.performance` is a getter, about 180 instructions a read (issue 44).
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { defaultTextMapGetter, defaultTextMapSetter, isSpanContextValid, propagation, ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Context, type Link, type SpanContext } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { CallTrace, TraceHeaders } from '../backends/backend.js';
import type { TelemetryConfig } from '../config/telemetry-schema.js';
import { packageVersion } from '../ops/version.js';
import { headersOf, headerValue } from '../wire/headers.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER } from '../wire/protocol.js';
import { DurationHistogram } from './duration-histogram.js';
import { cappedJson, describeMessage, METRIC_KEYS, METRIC_SLOTS, responseError, serverOf } from './mcp-attributes.js';
import { HistogramProducer } from './metric-producer.js';
import { otlpMetricExporter } from './otlp-http-delegate.js';
import { OtlpJsonTraceExporter } from './otlp-trace-exporter.js';
import { RecordedSpan, type SpanSource } from './recorded-span.js';
import { RootSampling } from './root-sampling.js';
import { SLOT, type SpanAttributes } from './span-attributes.js';
import { BoundedSpanQueue, spanQueueLimits } from './span-queue.js';
import type { ClientScope, ClientTarget, ServerScope, SpansDropped, Telemetry } from './telemetry.js';

/** The convention's ExplicitBucketBoundaries for all MCP duration histograms, in seconds. */
export const MCP_DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

const SCOPE_NAME = 'switchboard';
const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] });
const baggagePropagator = new W3CBaggagePropagator();

interface Instruments {
  server: DurationHistogram;
  client: DurationHistogram;
  session: DurationHistogram;
}

/** The attributes of `mcp.server.session.duration`, in the order they were always given. */
const SESSION_KEYS = ['network.transport', 'network.protocol.name', 'mcp.protocol.version'];

/** The convention's three duration histograms; an attribute set beyond the cardinality limit is logged once per histogram. */
function durationHistograms(log: FastifyBaseLogger): Instruments {
  const histogram = (name: string, description: string, keys: readonly string[], slots?: readonly number[]) =>
    new DurationHistogram({ name, description, keys, slots, boundaries: MCP_DURATION_BUCKETS, onOverflow: () => log.warn({ metric: name }, 'OpenTelemetry metric over its cardinality limit: further attribute sets are counted under otel.metric.overflow=true') });
  return {
    server: histogram('mcp.server.operation.duration', 'MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.', METRIC_KEYS, METRIC_SLOTS),
    client: histogram('mcp.client.operation.duration', 'The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.', METRIC_KEYS, METRIC_SLOTS),
    session: histogram('mcp.server.session.duration', 'The duration of the MCP session as observed on the MCP server.', SESSION_KEYS),
  };
}

export function createOtelTelemetry(config: TelemetryConfig, log: FastifyBaseLogger, dropped: SpansDropped): Telemetry {
  // One instance id per process: the replicas behind one service tell apart.
  const resource = resourceFromAttributes({ 'service.name': 'switchboard', 'service.version': packageVersion(), 'service.instance.id': randomUUID() });
  const endpoint = config.otlp.endpoint.replace(/\/+$/, '');
  const headers = config.otlp.headers;
  const limits = spanQueueLimits(config.spans);
  // Never in a call's way: a bounded queue, one export at a time, drops counted (span-queue.ts);
  // the SDK's OTLP/HTTP export with our OTLP/JSON encoder (otlp-trace-exporter.ts).
  const queue = new BoundedSpanQueue(new OtlpJsonTraceExporter({ url: `${endpoint}/v1/traces`, headers, timeoutMillis: limits.exportTimeoutMs }), dropped, limits);
  const instruments = durationHistograms(log);
  const spans: Spans = {
    source: { resource, instrumentationScope: { name: SCOPE_NAME, version: packageVersion() } },
    roots: new RootSampling(config.sampling.ratio),
    queue,
    instruments,
    config,
  };
  // The SDK's meter provider has no instrument of its own: its reader exports ours (metric-producer.ts),
  // which are cumulative — said to the exporter too, so OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE is not read.
  const producer = new HistogramProducer({ name: SCOPE_NAME, version: packageVersion() }, [instruments.server, instruments.client, instruments.session], resource);
  const meterProvider = new MeterProvider({
    resource,
    readers: [new PeriodicExportingMetricReader({ exporter: otlpMetricExporter(`${endpoint}/v1/metrics`, headers), metricProducers: [producer] })],
  });
  // The origin only: an endpoint URL may carry credentials.
  log.info({ endpoint: new URL(endpoint).origin, ratio: config.sampling.ratio }, 'OpenTelemetry export on');
  return {
    recordsContent: config.recordContent,
    server: (request, message, backend) => startServerSpan(spans, { request, message, backend }),
    client: (target, message, parent, session, server) => startClientSpan(spans, { target, message, parent, session, server }),
    sessionEnded: (createdAt, protocolVersion) => {
      // SESSION_KEYS' values, in their order.
      instruments.session.record(Math.max(0, Date.now() - createdAt) / 1000, ['tcp', 'http', protocolVersion || undefined]);
    },
    auditSink: async (dropped) => (await import('./audit-logs.js')).createAuditLogSink(endpoint, headers, resource, packageVersion(), dropped),
    shutdown: async () => {
      // Both flush what they hold before stopping (SIGTERM: SPEC §5 graceful shutdown).
      const results = await Promise.allSettled([queue.shutdown(), meterProvider.shutdown()]);
      for (const r of results) if (r.status === 'rejected') log.warn({ err: (r.reason as Error)?.message }, 'OpenTelemetry export at shutdown failed');
    },
  };
}

/** What every span of the process is made with: one object, so no closure is made per call. */
interface Spans {
  readonly source: SpanSource;
  readonly roots: RootSampling;
  readonly queue: BoundedSpanQueue;
  readonly instruments: Instruments;
  readonly config: TelemetryConfig;
}

/**
 * A span's parent as the gateway carries it: the span context to continue, valid (none for a
 * root: {@link parentOf} drops an invalid one), and the W3C `baggage` text that goes with it to
 * the backend.
 */
interface Parent {
  readonly span: SpanContext | undefined;
  readonly baggage: string | undefined;
}

/**
 * One span's life: attributes gathered, the outcome set once, the duration recorded at its end.
 * It is the scope the gateway holds (no closures made per call), for the SERVER span and the CLIENT span alike.
 */
class SpanLife implements ServerScope, ClientScope {
  readonly #started: number;
  #ended = false;
  #failed = false;

  /** The span's context as W3C text, for `params._meta` and the headers; none without a span. */
  readonly headers: TraceHeaders;

  constructor(
    private readonly spans: Spans,
    /** The span's own context; undefined: not sampled and no context to carry ({@link startSpan}), only the histogram is recorded. */
    readonly context: SpanContext | undefined,
    /** The record to export: only a sampled span has one. */
    private readonly record: RecordedSpan | undefined,
    readonly attributes: SpanAttributes,
    private readonly histogram: DurationHistogram,
    baggage: string | undefined,
    started: number,
  ) {
    this.#started = started;
    this.headers = context ? { traceparent: traceparentOf(context), tracestate: context.traceState?.serialize(), baggage } : NO_CONTEXT;
  }

  get traceId(): string {
    return this.context?.traceId ?? '';
  }

  /** No context goes to the backend: the request is not sampled and its client sent none. */
  get unsampledRoot(): boolean {
    return !this.context;
  }

  observe(message: JsonRpcMessage): void {
    if (this.#ended || this.#failed) return;
    const error = responseError(message);
    if (error) {
      this.#fail(error.type, error.statusCode, error.message);
      return;
    }
    const { config } = this.spans;
    const values = this.attributes.values;
    if (config.recordContent && this.record && values[SLOT['mcp.method.name']] === 'tools/call' && message.result !== undefined) {
      values[SLOT['gen_ai.tool.call.result']] = cappedJson(message.result, config.contentMaxBytes);
    }
  }

  /** `failure`: the `error.type` when no response came, or the gateway's own outcome (those in NOT_FAILED are none). */
  end(failure?: string): void {
    if (this.#ended) return;
    if (failure && !this.#failed && !NOT_FAILED.has(failure)) this.#fail(failure);
    this.#ended = true;
    const now = performance.now();
    if (this.record) {
      this.record.ended(now);
      this.spans.queue.onEnd(this.record);
    }
    // The span's attributes as they are: the histogram reads only its slots (METRIC_SLOTS), no copy made.
    this.histogram.record((now - this.#started) / 1000, this.attributes.values);
  }

  /** `error.type`, and `rpc.response.status_code` for a JSON-RPC error; the status ERROR, described by `message`. */
  #fail(type: string, statusCode?: string, message?: string): void {
    this.#failed = true;
    const values = this.attributes.values;
    values[SLOT['error.type']] = type;
    if (statusCode !== undefined) values[SLOT['rpc.response.status_code']] = statusCode;
    this.record?.failed(message);
  }
}

/** Outcomes of the gateway's own that are not failures (metrics' McpOutcome). */
const NOT_FAILED: ReadonlySet<string> = new Set(['relayed', 'answered_by_gateway']);

function startServerSpan(spans: Spans, p: { request: FastifyRequest; message: JsonRpcMessage; backend: string }): ServerScope {
  const started = performance.now();
  const { request, message } = p;
  const headers = headersOf(request);
  const { parent, links } = serverParent(headers, message);
  const context = spanContextOf(spans.roots, parent, false);
  // Not recorded: only the histogram's attributes (METRIC_KEYS) are needed, so the client's
  // address, port, session and user are not looked up (issue 44 part 1: metrics only).
  const recorded = isRecorded(context);
  const { name, attributes } = describeMessage(message);
  const values = attributes.values;
  const version = headerValue(headers[HEADER.protocolVersion]);
  if (recorded) {
    const session = headerValue(headers[HEADER.sessionId]);
    if (session) values[SLOT['mcp.session.id']] = session;
  }
  if (version) values[SLOT['mcp.protocol.version']] = version;
  if (recorded) values[SLOT['client.address']] = request.ip;
  values[SLOT['network.transport']] = 'tcp';
  values[SLOT['network.protocol.name']] = 'http';
  values[SLOT['network.protocol.version']] = request.raw.httpVersion;
  values[SLOT['switchboard.backend']] = p.backend;
  if (recorded) {
    values[SLOT['client.port']] = request.socket?.remotePort;
    const principal = request.principal;
    if (principal) {
      if (spans.config.user === 'sub') values[SLOT['user.id']] = principal.sub;
      else values[SLOT['enduser.pseudo.id']] = principal.userKey;
    }
  }
  return startSpan(spans, spans.instruments.server, { name, kind: SpanKind.SERVER, attributes, links, message, started }, parent, context);
}

/**
 * A span's context as the SDK's tracer with `ParentBasedSampler({ root: TraceIdRatioBasedSampler(ratio) })`
 * would make it, without the tracer (recorded-span.ts says what that saves):
 * - a valid parent that is sampled: a recorded child, same trace id and trace state, a new span
 *   id, flags SAMPLED (the sampler's default for a sampled parent, remote or local, is AlwaysOn);
 * - a valid parent that is not sampled: a span context only, the same trace id and trace state,
 *   a new span id, flags 0, so the backend still learns it is not sampled (AlwaysOff);
 * - no valid parent: a root, judged by the ratio first (root-sampling.ts), recorded under the
 *   trace id judged.
 * The histograms are recorded either way (SpanLife).
 *
 * No context at all when the request is not sampled and has no parent: no client
 * context to carry on, and a trace id made up here that nobody records would tell the backend
 * nothing. Then nothing is injected into the request, neither `params._meta` nor headers
 * (issue 44: "don't inject at all into a request that is not sampled, unless the backend must
 * see an unsampled parent" — it must when the client sent one, which is then carried). The
 * CLIENT span of such a request (`unsampledRoot`, told by its SERVER span) is none either:
 * without this it would be a root of its own, sampled by the ratio.
 */
function spanContextOf(roots: RootSampling, parent: Parent, unsampledRoot: boolean): SpanContext | undefined {
  const from = parent.span;
  if (from !== undefined) {
    const flags = from.traceFlags & TraceFlags.SAMPLED ? TraceFlags.SAMPLED : TraceFlags.NONE;
    return { traceId: from.traceId, spanId: roots.spanId(), traceFlags: flags, traceState: from.traceState };
  }
  // A root the ratio does not sample: as above, nothing to carry.
  const traceId = unsampledRoot ? undefined : roots.admit();
  return traceId ? { traceId, spanId: roots.spanId(), traceFlags: TraceFlags.SAMPLED } : undefined;
}

/** Whether a span with this context is recorded (and exported): it is sampled. */
function isRecorded(context: SpanContext | undefined): context is SpanContext {
  return context !== undefined && (context.traceFlags & TraceFlags.SAMPLED) !== 0;
}

/** The span's life over its context ({@link spanContextOf}): a record when it is sampled, the histogram always. */
function startSpan(
  spans: Spans,
  histogram: DurationHistogram,
  s: { name: string; kind: SpanKind; attributes: SpanAttributes; links?: Link[]; message: JsonRpcMessage; started: number },
  parent: Parent,
  context: SpanContext | undefined,
): SpanLife {
  let record: RecordedSpan | undefined;
  if (isRecorded(context)) {
    record = new RecordedSpan(spans.source, s.name, s.kind, context, parent.span, s.attributes, s.links, s.started);
    contentAttributes(spans.config, s.message, s.attributes);
  }
  return new SpanLife(spans, context, record, s.attributes, histogram, context ? parent.baggage : undefined, s.started);
}

/** The context of a request that has none to carry. */
const NO_CONTEXT: TraceHeaders = Object.freeze({});

/**
 * `-` and the trace flags as two lowercase hex digits, for each value of their byte (W3C Trace
 * Context §3.2.2.5): made once. The OTel propagator writes `0` and the flags in hex, three digits
 * from 0x10 up; this writes two always, and no number is turned into a string per call.
 */
const FLAGS_SUFFIX: readonly string[] = Array.from({ length: 256 }, (_, flags) => `-${flags.toString(16).padStart(2, '0')}`);

/** `traceparent` of a span context, as the W3C propagator writes it (version 00, flags as two hex digits). */
function traceparentOf(c: SpanContext): string {
  return `00-${c.traceId}-${c.spanId}${FLAGS_SUFFIX[(c.traceFlags || TraceFlags.NONE) & 0xff]}`;
}

/** The `_meta` context first, else the headers'; the headers' as a link when both differ. */
function serverParent(headers: FastifyRequest['headers'], message: JsonRpcMessage): { parent: Parent; links?: Link[] } {
  const meta = (message.params as { _meta?: unknown } | undefined)?._meta;
  const hasMeta = meta !== null && typeof meta === 'object' && 'traceparent' in meta;
  // The usual call carries no context at all: nothing to extract (the W3C propagators read only these two headers first).
  if (!hasMeta && headers.traceparent === undefined && headers.baggage === undefined) return ROOT_SERVER_PARENT;
  const fromHeaders = propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
  const headerSpan = trace.getSpanContext(fromHeaders);
  if (!hasMeta) return { parent: parentOf(fromHeaders) };
  const fromMeta = propagator.extract(ROOT_CONTEXT, meta, defaultTextMapGetter);
  const metaSpan = trace.getSpanContext(fromMeta);
  if (!metaSpan) return { parent: parentOf(fromHeaders) };
  const differs = headerSpan && (headerSpan.traceId !== metaSpan.traceId || headerSpan.spanId !== metaSpan.spanId);
  return { parent: parentOf(fromMeta), links: differs ? [{ context: headerSpan }] : undefined };
}

/** A request without trace context: a root. */
const ROOT: Parent = Object.freeze({ span: undefined, baggage: undefined });
/** {@link serverParent}'s answer for such a request, made once. */
const ROOT_SERVER_PARENT: { parent: Parent } = Object.freeze({ parent: ROOT });

/** A parent from an extracted context: its span context when valid, and its baggage as the W3C baggage propagator writes it again. */
function parentOf(ctx: Context): Parent {
  let baggage: string | undefined;
  if (propagation.getBaggage(ctx)) {
    const carrier: Record<string, string> = {};
    baggagePropagator.inject(ctx, carrier, defaultTextMapSetter);
    baggage = carrier.baggage;
  }
  const span = trace.getSpanContext(ctx);
  return { span: span && isSpanContextValid(span) ? span : undefined, baggage };
}

function startClientSpan(spans: Spans, p: { target: ClientTarget; message: JsonRpcMessage; parent: TraceHeaders; session: { id?: string; protocolVersion?: string }; server?: CallTrace }): ClientScope {
  const started = performance.now();
  const { name, attributes } = describeMessage(p.message);
  const values = attributes.values;
  if (p.session.id) values[SLOT['mcp.session.id']] = p.session.id;
  if (p.session.protocolVersion) values[SLOT['mcp.protocol.version']] = p.session.protocolVersion;
  const server = serverOfTarget(p.target);
  values[SLOT['server.address']] = server['server.address'];
  values[SLOT['server.port']] = server['server.port'];
  values[SLOT['network.transport']] = 'tcp';
  values[SLOT['network.protocol.name']] = 'http';
  values[SLOT['switchboard.backend']] = p.target.name;
  const parent = clientParent(p.parent, p.server);
  return startSpan(spans, spans.instruments.client, { name, kind: SpanKind.CLIENT, attributes, message: p.message, started }, parent, spanContextOf(spans.roots, parent, p.server?.unsampledRoot === true));
}

/**
 * A CLIENT span's parent: the SERVER span's own context when the call carries that span's text
 * (the usual case: backends/caller.ts traceHeaders), else the text's, parsed. Taken as it is, the
 * parent is what it is, a span of this process (not remote), and the `traceparent` this process
 * has just written is not parsed back with the W3C propagator's regular expressions (issue 44
 * part 1: 3 to 5 µs of a sampled call in a profile).
 */
function clientParent(text: TraceHeaders, server: CallTrace | undefined): Parent {
  const own = server instanceof SpanLife ? server : undefined;
  if (own?.context && own.headers.traceparent === text.traceparent && own.headers.tracestate === text.tracestate && own.headers.baggage === text.baggage) {
    return { span: own.context, baggage: own.headers.baggage };
  }
  // No context to carry (an unsampled root's SERVER span writes none): nothing to parse.
  if (text.traceparent === undefined && text.baggage === undefined) return ROOT;
  return parentOf(propagator.extract(ROOT_CONTEXT, text, defaultTextMapGetter));
}

/** `server.address`/`server.port` of each backend client's target, read from its URL once (not per call). */
const targetAttributes = new WeakMap<ClientTarget, ReturnType<typeof serverOf>>();

function serverOfTarget(target: ClientTarget): ReturnType<typeof serverOf> {
  let attributes = targetAttributes.get(target);
  if (!attributes) targetAttributes.set(target, (attributes = serverOf(target.url)));
  return attributes;
}

/** Opt-in (`recordContent`): a tool call's arguments, capped — only on a span that is recorded. */
function contentAttributes(config: TelemetryConfig, message: JsonRpcMessage, attributes: SpanAttributes): void {
  if (!config.recordContent || message.method !== 'tools/call') return;
  const args = (message.params as { arguments?: unknown } | undefined)?.arguments;
  if (args !== undefined) attributes.values[SLOT['gen_ai.tool.call.arguments']] = cappedJson(args, config.contentMaxBytes);
}
