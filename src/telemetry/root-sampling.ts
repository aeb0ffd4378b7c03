/**
 * The ratio's decision for a root span, and the ids of the spans the gateway makes (issue 44
 * part 1: governance at sampling 0.1 should cost little more than sampling 0). A root not
 * sampled costs one random trace id and the decision; nothing else is made for it.
 *
 * The decision is the SDK's own: a trace id is drawn and judged by the SDK's
 * `TraceIdRatioBasedSampler` — the sampler a `ParentBasedSampler` uses for roots — and a
 * sampled root gets that very id, so trace ids stay ratio-consistent, as another service
 * sampling by trace id expects. Decided per root only: a span with a parent follows the
 * parent's flag (otel-sdk.ts startSpan, as `ParentBasedSampler`'s defaults do).
 */
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { RandomIdGenerator, SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';

export class RootSampling {
  readonly #random = new RandomIdGenerator();
  readonly #sampler: TraceIdRatioBasedSampler;

  constructor(readonly ratio: number) {
    this.#sampler = new TraceIdRatioBasedSampler(ratio);
  }

  /** The trace id of a root span to be recorded; undefined when the ratio does not sample it (always at ratio 0). */
  admit(): string | undefined {
    if (this.ratio <= 0) return undefined;
    const traceId = this.#random.generateTraceId();
    if (this.ratio >= 1) return traceId;
    return this.#sampler.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED ? traceId : undefined;
  }

  /** A new span id (16 hex digits), as the SDK's tracer draws them. */
  spanId(): string {
    return this.#random.generateSpanId();
  }
}
