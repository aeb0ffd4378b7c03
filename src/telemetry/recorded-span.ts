/**
 * A sampled span as the gateway records it (issue 44 part 1: "measure the OTel SDK's own cost
 * per span … to know the floor"). The SDK's `Tracer.startSpan` and `Span` were a fifth of a
 * governed call's added CPU in a profile (bench/governance-profile.ts): the sampler asked again
 * for an answer the gateway already knew (otel-sdk.ts startSpan), each attribute set copied and
 * sanitised, a `Context` made per span, clock reads turned into `HrTime`s at once.
 *
 * This record holds what an exported span is made of and nothing else: the attributes the
 * gateway set in their layout (span-attributes.ts; not copied: the gateway's attributes are
 * strings and numbers by type), its context, its parent's, the status, and two clock readings taken with
 * `performance.now()`, turned into epoch `HrTime`s only when the batch is encoded, off the call's
 * path. It has the fields of the SDK's `ReadableSpan` the OTLP encoder reads
 * ({@link EncodableSpan}), so the encoder (otlp-json-spans.ts) and the queue (span-queue.ts)
 * take either, and the encoding test compares it with the SDK's serializer on the SDK's spans.
 *
 * What the SDK's span did besides, and why it is not needed here:
 * - span limits (128 attributes, `OTEL_SPAN_*_LIMIT`): a gateway span has a fixed set of about
 *   twenty keys, and its two content attributes are capped by `telemetry.contentMaxBytes`;
 * - events: the gateway records none;
 * - `setAttribute`/`setStatus` after `end()` ignored: SpanLife (otel-sdk.ts) ends a span once
 *   and touches it no more.
 */
import { SpanStatusCode, type HrTime, type Link, type SpanContext, type SpanKind, type SpanStatus } from '@opentelemetry/api';
import { millisToHrTime, type InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';
import type { SpanAttributes } from './span-attributes.js';

/** What the OTLP/JSON encoder and the span queue read of an ended span: fields the SDK's `ReadableSpan` has too. */
export type EncodableSpan = Pick<
  ReadableSpan,
  | 'name'
  | 'kind'
  | 'spanContext'
  | 'parentSpanContext'
  | 'startTime'
  | 'endTime'
  | 'status'
  | 'attributes'
  | 'links'
  | 'events'
  | 'droppedAttributesCount'
  | 'droppedEventsCount'
  | 'droppedLinksCount'
  | 'resource'
  | 'instrumentationScope'
>;

/** Who records: the process's resource and the instrumentation scope, shared by every span. */
export interface SpanSource {
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
}

const UNSET: SpanStatus = Object.freeze({ code: SpanStatusCode.UNSET });
const NO_EVENTS: TimedEvent[] = Object.freeze([]) as unknown as TimedEvent[];
const NO_LINKS: Link[] = Object.freeze([]) as unknown as Link[];

/** The process's time origin as an `HrTime`: fixed for the process, so converted once. */
const ORIGIN: HrTime = millisToHrTime(performance.timeOrigin);

/*
 * `performance.now()` milliseconds as an epoch time, as the SDK's span computes it — the time
 * origin plus the reading, each exact: `addHrTimes(ORIGIN, millisToHrTime(ms))` of
 * @opentelemetry/core (whole seconds by truncation, nanoseconds rounded from the milliseconds'
 * remainder, summed with the origin's and carried once past a second; test/telemetry/
 * recorded-span.test.ts checks it against those at every carry). Its two parts are computed apart
 * so the encoder, which writes both times of every span, makes no array (issue 44 part 1).
 */

/** The epoch time's seconds. */
export function epochSeconds(performanceMs: number): number {
  const nanos = ORIGIN[1] + Math.round((performanceMs % 1000) * 1e6);
  return ORIGIN[0] + Math.trunc(performanceMs / 1000) + (nanos >= 1e9 ? 1 : 0);
}

/** The epoch time's nanoseconds. */
export function epochNanos(performanceMs: number): number {
  const nanos = ORIGIN[1] + Math.round((performanceMs % 1000) * 1e6);
  return nanos >= 1e9 ? nanos - 1e9 : nanos;
}

export class RecordedSpan implements EncodableSpan {
  status: SpanStatus = UNSET;
  readonly events = NO_EVENTS;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  readonly links: Link[];
  #endMs: number;

  constructor(
    private readonly source: SpanSource,
    readonly name: string,
    readonly kind: SpanKind,
    private readonly context: SpanContext,
    /** Undefined for a root; `isRemote` when it came from the client or an HTTP header. */
    readonly parentSpanContext: SpanContext | undefined,
    /** The gateway's own attributes, shared with the span's histogram (SpanLife); written by the encoder from their layout (otlp-json-spans.ts). */
    readonly own: SpanAttributes,
    links: Link[] | undefined,
    private readonly startMs: number,
  ) {
    this.links = links ?? NO_LINKS;
    this.#endMs = startMs;
  }

  spanContext(): SpanContext {
    return this.context;
  }

  /** The attributes as the SDK's span holds them (an object, in the layout's order): for readers other than the encoder, and tests. */
  get attributes(): Record<string, string | number | boolean> {
    return this.own.toObject();
  }

  get resource(): Resource {
    return this.source.resource;
  }

  get instrumentationScope(): InstrumentationScope {
    return this.source.instrumentationScope;
  }

  get startTime(): HrTime {
    return [epochSeconds(this.startMs), epochNanos(this.startMs)];
  }

  get endTime(): HrTime {
    return [epochSeconds(this.#endMs), epochNanos(this.#endMs)];
  }

  /** The clock readings of the start and the end (`performance.now()`): the encoder writes the times from them (epochSeconds, epochNanos). */
  get startMilliseconds(): number {
    return this.startMs;
  }

  get endMilliseconds(): number {
    return this.#endMs;
  }

  /** ERROR, described by `message` when there is one (the SDK keeps a status message only when it is a string). */
  failed(message: string | undefined): void {
    this.status = message === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message };
  }

  /** The end's clock reading (`performance.now()`, the one the histogram takes too). */
  ended(endMs: number): void {
    this.#endMs = endMs;
  }
}
