/**
 * The spans' way to the collector, which never holds up a call (issue 44 part 1: "the OTLP
 * export never blocks a call. A collector that is slow or down costs a bounded queue, dropped
 * spans counted in a metric, not latency or memory growth").
 *
 * A call only writes its ended span into the request being filled (`onEnd`; otlp-json-batch.ts
 * says why at once, and as bytes); nothing on the call's path waits for or sends anything. The
 * queue holds at most `maxQueue` spans: one more is dropped and counted (`queue_full`). A request
 * of `batchSize` spans leaves when it is full, or `delayMs` after its first span; exactly one
 * export is in flight at a time, so a collector that stalls (accepts and never answers) holds one
 * batch for at most `exportTimeoutMs` — the exporter's own request timeout is the same bound.
 * One that refuses connections holds a batch as long: the OTLP exporter retries ECONNREFUSED
 * with backoff (1 s, 1.5 s, …) until that deadline, which rides out a collector's restart. A
 * batch that was not accepted in time is dropped and counted (`export_failed`): the exporter is
 * not waited on twice, and nothing is kept to retry, so memory stays at the queue's bound
 * whatever the collector does.
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
import { TraceRequestBatch } from './otlp-json-batch.js';
import { RequestBuffers } from '../ops/utf8-batch-writer.js';

/** Why spans were dropped: the queue was at its bound, or their batch's export failed or timed out. */
export type SpanDropReason = 'queue_full' | 'export_failed';

/** An exporter of written requests (otlp-trace-exporter.ts); it releases each request's buffer once its export settled. */
export interface TraceRequestExporter {
  export(batch: TraceRequestBatch, done: (result: ExportResult) => void): void;
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
 * too, the SDK's (its tests feed it a `TracerProvider`'s); both are written the same way.
 */
export class BoundedSpanQueue implements SpanProcessor {
  /** Requests full (or of an earlier resource or scope), waiting for their export, oldest first. */
  #waiting: TraceRequestBatch[] = [];
  /** The request being filled. */
  #filling: TraceRequestBatch | undefined;
  /** Spans in the requests waiting and the one being filled (not in the one in flight): what `maxQueue` bounds. */
  #queued = 0;
  #exporting: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Whether the last batch to settle was not taken: a flush stops there. */
  #lastFailed = false;
  readonly #buffers: RequestBuffers;
  /**
   * Requests waiting at most: as many as `maxQueue` spans fill. Only spans that change resource
   * or scope over and over (never the gateway's: one of each) reach it before `maxQueue`; each
   * request holds a buffer, so this bounds the memory as the span count does.
   */
  readonly #maxWaiting: number;

  constructor(
    private readonly exporter: TraceRequestExporter,
    private readonly dropped: (reason: SpanDropReason, count: number) => void,
    private readonly limits: SpanQueueLimits = SPAN_QUEUE_DEFAULTS,
  ) {
    this.#maxWaiting = Math.ceil(limits.maxQueue / limits.batchSize);
    // A buffer for each request the queue can hold, the one filling and the one in flight.
    this.#buffers = new RequestBuffers(this.#maxWaiting + 2);
  }

  onStart(): void {}

  onEnd(span: EncodableSpan): void {
    if (this.#stopped || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.#queued >= this.limits.maxQueue) {
      this.dropped('queue_full', 1);
      return;
    }
    let filling = this.#filling;
    if (filling && !filling.takes(span)) {
      if (this.#waiting.length >= this.#maxWaiting) {
        this.dropped('queue_full', 1);
        return;
      }
      this.#wait(filling);
      filling = undefined;
    }
    filling ??= this.#filling = new TraceRequestBatch(span, this.#buffers);
    filling.add(span);
    this.#queued++;
    if (filling.count >= this.limits.batchSize) this.#wait(filling);
    if (this.#exporting) return;
    if (this.#waiting.length) this.#exportNext();
    else this.#timer ??= setTimeout(() => this.#exportNext(), this.limits.delayMs).unref();
  }

  /** The request being filled is done: it waits for its export. */
  #wait(batch: TraceRequestBatch): void {
    batch.close();
    this.#waiting.push(batch);
    if (this.#filling === batch) this.#filling = undefined;
  }

  /** Starts the next batch's export unless one is in flight; when it settles, the next one if due. */
  #exportNext(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#exporting) return;
    if (!this.#waiting.length && this.#filling?.count) this.#wait(this.#filling);
    const batch = this.#waiting.shift();
    if (!batch) return;
    this.#queued -= batch.count;
    this.#exporting = this.#send(batch).finally(() => {
      this.#exporting = undefined;
      if (this.#waiting.length) setImmediate(() => this.#exportNext());
      else if (this.#filling?.count) this.#timer ??= setTimeout(() => this.#exportNext(), this.limits.delayMs).unref();
    });
  }

  /** One batch to the exporter; resolves when it answered or its time is up (then the batch counts as dropped). */
  #send(batch: TraceRequestBatch): Promise<void> {
    const count = batch.count;
    return new Promise((resolve) => {
      let done = false;
      const finish = (ok: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timeout);
        this.#lastFailed = !ok;
        if (!ok) this.dropped('export_failed', count);
        resolve();
      };
      const timeout = setTimeout(() => finish(false), this.limits.exportTimeoutMs).unref();
      try {
        this.exporter.export(batch, (result) => finish(result.code === ExportResultCode.SUCCESS));
      } catch {
        batch.release();
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
    while (this.#exporting || this.#queued) {
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
    if (this.#queued) this.dropped('export_failed', this.#queued);
    for (const batch of this.#filling ? [...this.#waiting, this.#filling] : this.#waiting) batch.release();
    this.#waiting = [];
    this.#filling = undefined;
    this.#queued = 0;
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
    this.#stopped = true;
    await this.exporter.shutdown();
  }
}
