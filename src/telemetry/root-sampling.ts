/**
 * The ratio's decision for a root span taken before the SDK's tracer is asked (issue 44 part 1:
 * governance at sampling 0.1 should cost little more than sampling 0). Without it the tracer
 * made every root call's span to drop nine in ten: ids generated, the sampler run, a
 * non-recording span and its context built — `Tracer.startSpan` was the largest telemetry item
 * left in the profile of a gateway at sampling 0.1, for spans nobody records.
 *
 * The decision is the SDK's own: a trace id is drawn and judged by the SDK's
 * `TraceIdRatioBasedSampler`, the sampler the tracer's `ParentBasedSampler` uses for roots.
 * A sampled id is handed to the tracer as the next root's trace id (this is the provider's id
 * generator), so the tracer judges that same id again and records it: trace ids stay
 * ratio-consistent, as another service sampling by trace id expects. Decided per root only:
 * a span with a parent follows the parent's flag, in the tracer as before.
 */
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { RandomIdGenerator, SamplingDecision, TraceIdRatioBasedSampler, type IdGenerator } from '@opentelemetry/sdk-trace';

export class RootSampling implements IdGenerator {
  readonly #random = new RandomIdGenerator();
  readonly #sampler: TraceIdRatioBasedSampler;
  /** The trace id the tracer's next root gets: set by {@link admit}, taken by {@link generateTraceId}. */
  #next: string | undefined;

  constructor(readonly ratio: number) {
    this.#sampler = new TraceIdRatioBasedSampler(ratio);
  }

  /**
   * Whether a root span is to be recorded. When it is (and the ratio is below 1), the tracer
   * must start it next, synchronously: its trace id is the one judged here.
   */
  admit(): boolean {
    if (this.ratio >= 1) return true;
    if (this.ratio <= 0) return false;
    const traceId = this.#random.generateTraceId();
    if (this.#sampler.shouldSample(ROOT_CONTEXT, traceId).decision !== SamplingDecision.RECORD_AND_SAMPLED) return false;
    this.#next = traceId;
    return true;
  }

  /** Forgets an admitted id the tracer did not take (it always does; a guard against a stale one). */
  settle(): void {
    this.#next = undefined;
  }

  generateTraceId(): string {
    const id = this.#next ?? this.#random.generateTraceId();
    this.#next = undefined;
    return id;
  }

  generateSpanId(): string {
    return this.#random.generateSpanId();
  }
}
