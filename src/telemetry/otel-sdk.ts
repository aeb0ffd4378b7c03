/**
 * The OpenTelemetry SDK behind `telemetry` (issue 30 §1), loaded only by a dynamic import from
 * telemetry.ts. No auto-instrumentation and no global registration: one tracer provider
 * (parent-based ratio sampler, bounded span queue, OTLP/HTTP exporter to `{endpoint}/v1/traces`),
 * one meter provider (OTLP/HTTP to `{endpoint}/v1/metrics`), W3C trace context and baggage,
 * and contexts passed by hand from the SERVER span to the CLIENT spans (the request carries it).
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
import { randomUUID } from 'node:crypto';
import { defaultTextMapGetter, defaultTextMapSetter, isSpanContextValid, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Context, type Link, type Span, type SpanOptions } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { AggregationTemporalityPreference, OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { RootSampling } from './root-sampling.js';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { CallTrace, TraceHeaders } from '../backends/backend.js';
import type { TelemetryConfig } from '../config/telemetry-schema.js';
import { packageVersion } from '../ops/version.js';
import { headerValue } from '../wire/headers.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER } from '../wire/protocol.js';
import { DurationHistogram } from './duration-histogram.js';
import { cappedJson, describeMessage, METRIC_KEYS, responseError, serverOf, type Attributes } from './mcp-attributes.js';
import { HistogramProducer } from './metric-producer.js';
import { OtlpJsonTraceExporter } from './otlp-trace-exporter.js';
import { BoundedSpanQueue, spanQueueLimits } from './span-queue.js';
import type { ClientScope, ClientTarget, ServerScope, SpansDropped, Telemetry } from './telemetry.js';

/** The convention's ExplicitBucketBoundaries for all MCP duration histograms, in seconds. */
export const MCP_DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

const SCOPE_NAME = 'switchboard';
const propagator = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] });

interface Instruments {
  server: DurationHistogram;
  client: DurationHistogram;
  session: DurationHistogram;
}

/** The attributes of `mcp.server.session.duration`, in the order they were always given. */
const SESSION_KEYS = ['network.transport', 'network.protocol.name', 'mcp.protocol.version'];

/** The convention's three duration histograms; an attribute set beyond the cardinality limit is logged once per histogram. */
function durationHistograms(log: FastifyBaseLogger): Instruments {
  const histogram = (name: string, description: string, keys: readonly string[]) =>
    new DurationHistogram({ name, description, keys, boundaries: MCP_DURATION_BUCKETS, onOverflow: () => log.warn({ metric: name }, 'OpenTelemetry metric over its cardinality limit: further attribute sets are counted under otel.metric.overflow=true') });
  return {
    server: histogram('mcp.server.operation.duration', 'MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.', METRIC_KEYS),
    client: histogram('mcp.client.operation.duration', 'The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.', METRIC_KEYS),
    session: histogram('mcp.server.session.duration', 'The duration of the MCP session as observed on the MCP server.', SESSION_KEYS),
  };
}

export function createOtelTelemetry(config: TelemetryConfig, log: FastifyBaseLogger, dropped: SpansDropped): Telemetry {
  // One instance id per process: the replicas behind one service tell apart.
  const resource = resourceFromAttributes({ 'service.name': 'switchboard', 'service.version': packageVersion(), 'service.instance.id': randomUUID() });
  const endpoint = config.otlp.endpoint.replace(/\/+$/, '');
  const headers = config.otlp.headers;
  const limits = spanQueueLimits(config.spans);
  const roots = new RootSampling(config.sampling.ratio);
  const tracerProvider = new TracerProvider({
    resource,
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampling.ratio) }),
    // A root's trace id is drawn and judged before the tracer is asked (root-sampling.ts).
    idGenerator: roots,
    // Never in a call's way: a bounded queue, one export at a time, drops counted (span-queue.ts);
    // the SDK's OTLP/HTTP export with our OTLP/JSON encoder (otlp-trace-exporter.ts).
    spanProcessors: [new BoundedSpanQueue(new OtlpJsonTraceExporter({ url: `${endpoint}/v1/traces`, headers, timeoutMillis: limits.exportTimeoutMs }), dropped, limits)],
  });
  const instruments = durationHistograms(log);
  // The SDK's meter provider has no instrument of its own: its reader exports ours (metric-producer.ts),
  // which are cumulative — said to the exporter too, so OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE is not read.
  const producer = new HistogramProducer({ name: SCOPE_NAME, version: packageVersion() }, [instruments.server, instruments.client, instruments.session], resource);
  const meterProvider = new MeterProvider({
    resource,
    readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: `${endpoint}/v1/metrics`, headers, temporalityPreference: AggregationTemporalityPreference.CUMULATIVE }), metricProducers: [producer] })],
  });
  const tracer = tracerProvider.getTracer(SCOPE_NAME, packageVersion());
  // The origin only: an endpoint URL may carry credentials.
  log.info({ endpoint: new URL(endpoint).origin, ratio: config.sampling.ratio }, 'OpenTelemetry export on');
  return {
    recordsContent: config.recordContent,
    server: (request, message, backend) => startServerSpan(tracer, roots, instruments, config, { request, message, backend }),
    client: (target, message, parent, session, unsampledRoot = false, server) => startClientSpan(tracer, roots, instruments, config, { target, message, parent, session, unsampledRoot, server }),
    sessionEnded: (createdAt, protocolVersion) => {
      const attributes: Attributes = { 'network.transport': 'tcp', 'network.protocol.name': 'http' };
      if (protocolVersion) attributes['mcp.protocol.version'] = protocolVersion;
      instruments.session.record(Math.max(0, Date.now() - createdAt) / 1000, attributes);
    },
    auditSink: async () => (await import('./audit-logs.js')).createAuditLogSink(endpoint, headers, resource, packageVersion()),
    shutdown: async () => {
      // Both flush what they hold before stopping (SIGTERM: SPEC §5 graceful shutdown).
      const results = await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
      for (const r of results) if (r.status === 'rejected') log.warn({ err: (r.reason as Error)?.message }, 'OpenTelemetry export at shutdown failed');
    },
  };
}

/**
 * One span's life: attributes gathered, the outcome set once, the duration recorded at its end.
 * It is the scope the gateway holds (no closures made per call), for the SERVER span and the CLIENT span alike.
 */
class SpanLife implements ServerScope, ClientScope {
  readonly #started = performance.now();
  #ended = false;
  #failed = false;

  /** The span's context as W3C text, for `params._meta` and the headers; none without a span. */
  readonly headers: TraceHeaders;

  /** The context {@link headers} were written from: a CLIENT span under this one starts from it (parentContext). */
  readonly context: Context | undefined;

  constructor(
    /** Undefined: not sampled and no context to carry ({@link startSpan}); only the histogram is recorded. */
    readonly span: Span | undefined,
    readonly attributes: Attributes,
    private readonly histogram: DurationHistogram,
    private readonly config: TelemetryConfig,
    parent: Context,
  ) {
    this.context = span ? trace.setSpan(parent, span) : undefined;
    this.headers = this.context ? injected(this.context) : NO_CONTEXT;
  }

  get traceId(): string {
    return this.span?.spanContext().traceId ?? '';
  }

  /** No context goes to the backend: the request is not sampled and its client sent none. */
  get unsampledRoot(): boolean {
    return !this.span;
  }

  observe(message: JsonRpcMessage): void {
    if (this.#ended || this.#failed) return;
    const error = responseError(message);
    if (error) {
      this.#fail(error.attributes, error.message);
      return;
    }
    if (this.config.recordContent && this.attributes['mcp.method.name'] === 'tools/call' && message.result !== undefined && this.span?.isRecording()) {
      this.span.setAttribute('gen_ai.tool.call.result', cappedJson(message.result, this.config.contentMaxBytes));
    }
  }

  /** `failure`: the `error.type` when no response came, or the gateway's own outcome (those in NOT_FAILED are none). */
  end(failure?: string): void {
    if (this.#ended) return;
    if (failure && !this.#failed && !NOT_FAILED.has(failure)) this.#fail({ 'error.type': failure });
    this.#ended = true;
    this.span?.end();
    // The span's attributes as they are: the histogram reads only its keys (METRIC_KEYS), no copy made.
    this.histogram.record((performance.now() - this.#started) / 1000, this.attributes);
  }

  #fail(attributes: Attributes, message?: string): void {
    this.#failed = true;
    Object.assign(this.attributes, attributes);
    this.span?.setAttributes(attributes);
    this.span?.setStatus({ code: SpanStatusCode.ERROR, message });
  }
}

/** Outcomes of the gateway's own that are not failures (metrics' McpOutcome). */
const NOT_FAILED: ReadonlySet<string> = new Set(['relayed', 'answered_by_gateway']);

function startServerSpan(tracer: ReturnType<TracerProvider['getTracer']>, roots: RootSampling, instruments: Instruments, config: TelemetryConfig, p: { request: FastifyRequest; message: JsonRpcMessage; backend: string }): ServerScope {
  const { request, message } = p;
  const { name, attributes } = describeMessage(message);
  const { parent, links } = serverParent(request, message);
  const version = headerValue(request.headers[HEADER.protocolVersion]);
  const session = headerValue(request.headers[HEADER.sessionId]);
  if (session) attributes['mcp.session.id'] = session;
  if (version) attributes['mcp.protocol.version'] = version;
  Object.assign(attributes, { 'client.address': request.ip, 'network.transport': 'tcp', 'network.protocol.name': 'http', 'network.protocol.version': request.raw.httpVersion, 'switchboard.backend': p.backend });
  if (request.socket?.remotePort !== undefined) attributes['client.port'] = request.socket.remotePort;
  const principal = request.principal;
  if (principal) {
    if (config.user === 'sub') attributes['user.id'] = principal.sub;
    else attributes['enduser.pseudo.id'] = principal.userKey;
  }
  const span = startSpan(tracer, roots, name, { kind: SpanKind.SERVER, attributes, links }, parent, false);
  contentAttributes(config, message, span);
  return new SpanLife(span, attributes, instruments.server, config, parent);
}

/**
 * The tracer's span, unless the sampler's answer is known beforehand to be "drop": a valid
 * parent that is not sampled (ParentBasedSampler's default for an unsampled parent, remote or
 * local, is AlwaysOff), or no parent at ratio 0 (TraceIdRatioBasedSampler(0) samples nothing).
 * Then a non-recording span over the context the SDK's Tracer would give it — the parent's
 * trace id and trace state or a new trace id, a new span id, flags 0, so the backend still
 * learns it is not sampled — without the tracer's copies of the attributes and sampler call
 * (issue 30 "Cost": sampling 0 should cost little). The histograms are recorded either way (SpanLife).
 *
 * A root (no valid parent) is judged by the ratio first (root-sampling.ts): one not sampled
 * never reaches the tracer.
 *
 * No span at all (undefined) when the request is not sampled and has no parent: no client
 * context to carry on, and a trace id made up here that nobody records would tell the backend
 * nothing. Then nothing is injected into the request, neither `params._meta` nor headers
 * (issue 44: "don't inject at all into a request that is not sampled, unless the backend must
 * see an unsampled parent" — it must when the client sent one, which is then carried). The
 * CLIENT span of such a request (`unsampledRoot`, told by its SERVER span) is none either:
 * without this it would be a root of its own, sampled by the ratio.
 */
function startSpan(tracer: ReturnType<TracerProvider['getTracer']>, roots: RootSampling, name: string, options: SpanOptions, parent: Context, unsampledRoot: boolean): Span | undefined {
  const from = trace.getSpanContext(parent);
  const valid = from !== undefined && isSpanContextValid(from);
  // A root the ratio does not sample: as above, nothing to carry — and the tracer not asked (root-sampling.ts).
  if (!valid && (unsampledRoot || !roots.admit())) return undefined;
  if (valid && (from.traceFlags & TraceFlags.SAMPLED) === 0) {
    return trace.wrapSpanContext({ traceId: from.traceId, spanId: roots.generateSpanId(), traceFlags: TraceFlags.NONE, traceState: from.traceState });
  }
  const span = tracer.startSpan(name, options, parent);
  roots.settle();
  return valid || span.isRecording() ? span : undefined;
}

/** The context of a request that has none to carry. */
const NO_CONTEXT: TraceHeaders = Object.freeze({});

/** The `_meta` context first, else the headers'; the headers' as a link when both differ. */
function serverParent(request: FastifyRequest, message: JsonRpcMessage): { parent: Context; links?: Link[] } {
  const meta = (message.params as { _meta?: unknown } | undefined)?._meta;
  const fromHeaders = propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
  const headerSpan = trace.getSpanContext(fromHeaders);
  if (!meta || typeof meta !== 'object' || !('traceparent' in meta)) return { parent: fromHeaders };
  const fromMeta = propagator.extract(ROOT_CONTEXT, meta, defaultTextMapGetter);
  const metaSpan = trace.getSpanContext(fromMeta);
  if (!metaSpan) return { parent: fromHeaders };
  const differs = headerSpan && (headerSpan.traceId !== metaSpan.traceId || headerSpan.spanId !== metaSpan.spanId);
  return { parent: fromMeta, links: differs ? [{ context: headerSpan }] : undefined };
}

function startClientSpan(tracer: ReturnType<TracerProvider['getTracer']>, roots: RootSampling, instruments: Instruments, config: TelemetryConfig, p: { target: ClientTarget; message: JsonRpcMessage; parent: TraceHeaders; session: { id?: string; protocolVersion?: string }; unsampledRoot: boolean; server?: CallTrace }): ClientScope {
  const { name, attributes } = describeMessage(p.message);
  if (p.session.id) attributes['mcp.session.id'] = p.session.id;
  if (p.session.protocolVersion) attributes['mcp.protocol.version'] = p.session.protocolVersion;
  Object.assign(attributes, serverOfTarget(p.target), { 'network.transport': 'tcp', 'network.protocol.name': 'http', 'switchboard.backend': p.target.name });
  const parent = parentContext(p.parent, p.server);
  const span = startSpan(tracer, roots, name, { kind: SpanKind.CLIENT, attributes }, parent, p.unsampledRoot);
  contentAttributes(config, p.message, span);
  return new SpanLife(span, attributes, instruments.client, config, parent);
}

/**
 * A CLIENT span's parent: the SERVER span's own context when the call carries that span's text
 * (the usual case: backends/caller.ts traceHeaders), else the text's, parsed. Taken as it is, the
 * parent is what it is, a span of this process (not remote), and the `traceparent` this process
 * has just written is not parsed back with the W3C propagator's regular expressions (issue 44
 * part 1: 3 to 5 µs of a sampled call in a profile).
 */
function parentContext(text: TraceHeaders, server: CallTrace | undefined): Context {
  const own = server instanceof SpanLife ? server : undefined;
  if (own?.context && own.headers.traceparent === text.traceparent && own.headers.tracestate === text.tracestate && own.headers.baggage === text.baggage) return own.context;
  return propagator.extract(ROOT_CONTEXT, text, defaultTextMapGetter);
}

/** `server.address`/`server.port` of each backend client's target, read from its URL once (not per call). */
const targetAttributes = new WeakMap<ClientTarget, Attributes>();

function serverOfTarget(target: ClientTarget): Attributes {
  let attributes = targetAttributes.get(target);
  if (!attributes) targetAttributes.set(target, (attributes = serverOf(target.url)));
  return attributes;
}

/** Opt-in (`recordContent`): a tool call's arguments, capped — only on a span that is recorded. */
function contentAttributes(config: TelemetryConfig, message: JsonRpcMessage, span: Span | undefined): void {
  if (!config.recordContent || message.method !== 'tools/call' || !span?.isRecording()) return;
  const args = (message.params as { arguments?: unknown } | undefined)?.arguments;
  if (args !== undefined) span.setAttribute('gen_ai.tool.call.arguments', cappedJson(args, config.contentMaxBytes));
}

/** `traceparent`, `tracestate` and `baggage` of a context, as W3C text. */
function injected(ctx: Context): TraceHeaders {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, defaultTextMapSetter);
  return { traceparent: carrier.traceparent, tracestate: carrier.tracestate, baggage: carrier.baggage };
}
