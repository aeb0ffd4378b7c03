/**
 * The spans' way to the collector, which never holds up a call (issue 44 part 1: "the OTLP
 * export never blocks a call. A collector that is slow or down costs a bounded queue, dropped
 * spans counted in a metric, not latency or memory growth").
 *
 * A call only appends its ended span to an array (`onEnd`); nothing on the call's path waits
 * for, encodes or sends anything. The queue holds at most `maxQueue` spans: one more is dropped
 * and counted (`queue_full`). Batches of up to `batchSize` leave when that many are waiting, or
 * `delayMs` after the first; exactly one export is in flight at a time, so a collector that
 * stalls (accepts and never answers) holds one batch for at most `exportTimeoutMs` — the
 * exporter's own request timeout is the same bound. One that refuses connections holds a batch
 * as long: the OTLP exporter retries ECONNREFUSED with backoff (1 s, 1.5 s, …) until that
 * deadline, which rides out a collector's restart. A batch that was not accepted in time is dropped and counted
 * (`export_failed`): the exporter is not waited on twice, and nothing is kept to retry, so
 * memory stays at the queue's bound whatever the collector does.
 *
 * Replaces the SDK's BatchSpanProcessor, which has the same bounded queue but counts its drops
 * only in a diagnostic log line, and lets exports pile up in the exporter (up to its
 * concurrency limit) while the collector stalls.
 */
import { TraceFlags } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { SpanProcessor } from '@opentelemetry/sdk-trace';
import type { EncodableSpan } from './recorded-span.js';
import type { TelemetryConfig } from '../config/telemetry-schema.js';

/** Why spans were dropped: the queue was at its bound, or their batch's export failed or timed out. */
export type SpanDropReason = 'queue_full' | 'export_failed';

/** An exporter of spans as the queue holds them (otlp-trace-exporter.ts; an SDK `SpanExporter` is one too). */
export interface EncodableSpanExporter {
  export(spans: EncodableSpan[], done: (result: ExportResult) => void): void;
  shutdown(): Promise<void>;
}

export interface SpanQueueLimits {
  maxQueue: number;
  batchSize: number;
  delayMs: number;
  exportTimeoutMs: number;
}

/** The SDK's defaults for its batch processor (OTEL_BSP_*), kept: 2048 spans, batches of 512, 5 s, 30 s → 10 s (the exporter's own timeout). */
export const SPAN_QUEUE_DEFAULTS: SpanQueueLimits = { maxQueue: 2048, batchSize: 512, delayMs: 5000, exportTimeoutMs: 10_000 };

/** The limits `telemetry.spans` sets (config/telemetry-schema.ts; its defaults are the ones above). */
export function spanQueueLimits(spans: TelemetryConfig['spans']): SpanQueueLimits {
  return { maxQueue: spans.queueSize, batchSize: spans.batchSize, delayMs: spans.batchDelay, exportTimeoutMs: spans.exportTimeout };
}

/**
 * The queue takes the gateway's own spans (recorded-span.ts) and, being an SDK `SpanProcessor`
 * too, the SDK's (its tests feed it a `TracerProvider`'s); its exporter sends both as they are.
 */
export class BoundedSpanQueue implements SpanProcessor {
  #queue: EncodableSpan[] = [];
  #exporting: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Whether the last batch to settle was not taken: a flush stops there. */
  #lastFailed = false;

  constructor(
    private readonly exporter: EncodableSpanExporter,
    private readonly dropped: (reason: SpanDropReason, count: number) => void,
    private readonly limits: SpanQueueLimits = SPAN_QUEUE_DEFAULTS,
  ) {}

  onStart(): void {}

  onEnd(span: EncodableSpan): void {
    if (this.#stopped || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.#queue.length >= this.limits.maxQueue) {
      this.dropped('queue_full', 1);
      return;
    }
    this.#queue.push(span);
    if (this.#exporting) return;
    if (this.#queue.length >= this.limits.batchSize) this.#exportNext();
    else this.#timer ??= setTimeout(() => this.#exportNext(), this.limits.delayMs).unref();
  }

  /** Starts the next batch's export unless one is in flight; when it settles, the next one if due. */
  #exportNext(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#exporting || !this.#queue.length) return;
    const batch = this.#queue.splice(0, this.limits.batchSize);
    this.#exporting = this.#send(batch).finally(() => {
      this.#exporting = undefined;
      if (this.#queue.length >= this.limits.batchSize) setImmediate(() => this.#exportNext());
      else if (this.#queue.length) this.#timer ??= setTimeout(() => this.#exportNext(), this.limits.delayMs).unref();
    });
  }

  /** One batch to the exporter; resolves when it answered or its time is up (then the batch counts as dropped). */
  #send(batch: EncodableSpan[]): Promise<void> {
    return new Promise((resolve) => {
      let done = false;
      const finish = (ok: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timeout);
        this.#lastFailed = !ok;
        if (!ok) this.dropped('export_failed', batch.length);
        resolve();
      };
      const timeout = setTimeout(() => finish(false), this.limits.exportTimeoutMs).unref();
      try {
        this.exporter.export(batch, (result) => finish(result.code === ExportResultCode.SUCCESS));
      } catch {
        finish(false);
      }
    });
  }

  /**
   * Exports everything queued now (graceful shutdown, SPEC §5), batch after batch, and stops at
   * the first batch the collector did not take: the spans left are counted as dropped
   * (`export_failed`). So a collector that stalls costs a shutdown one export timeout, not one
   * per batch (a full queue is five of them, 50 s, past Kubernetes' default grace period).
   */
  async forceFlush(): Promise<void> {
    this.#lastFailed = false;
    while (this.#exporting || this.#queue.length) {
      if (!this.#exporting) this.#exportNext();
      await this.#exporting;
      if (this.#lastFailed) {
        this.#dropQueued();
        return;
      }
    }
  }

  #dropQueued(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#queue.length) this.dropped('export_failed', this.#queue.length);
    this.#queue = [];
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
    this.#stopped = true;
    await this.exporter.shutdown();
  }
}
