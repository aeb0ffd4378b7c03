/**
 * The gateway's OTLP/HTTP span exporter (issue 44 part 1): the SDK's `OTLPTraceExporter`
 * (@opentelemetry/exporter-trace-otlp-http) with one part changed, the encoder. It is assembled
 * with two parts changed: the encoder, and the transport. It is assembled as that class assembles
 * itself — `OTLPExporterBase` over an export delegate made with the options
 * `convertLegacyHttpOptions` makes of the same config (signal `TRACES`, path `v1/traces`,
 * `Content-Type: application/json`), the SDK's span counting for its own exporter metrics — but
 * the delegate sends through undici (otlp-http-delegate.ts). The retries (with backoff, until the
 * timeout), the timeout, the headers, the compression and the concurrency limit behave as the
 * SDK's. The request body is ours: a request already written, span by span as each ended
 * (otlp-json-batch.ts), the same OTLP/JSON document the SDK's serializer writes, at a fraction of
 * the CPU.
 *
 * The body is the request's buffer, lent to it (utf8-batch-writer.ts says why: a fresh buffer
 * per batch cost more than the encoding); it goes back when the export has settled — its result
 * reported, so the transport (retries included) is done with the body. An export the span queue
 * gave up on keeps its buffer until the SDK settles it.
 *
 * OTLP/HTTP with JSON payloads: https://opentelemetry.io/docs/specs/otlp/#otlphttp-request
 * (a POST to `/v1/traces` of an `ExportTraceServiceRequest`, `Content-Type: application/json`).
 */
import type { ExportResult } from '@opentelemetry/core';
import { OTLPExporterBase, type OTLPExporterNodeConfigBase } from '@opentelemetry/otlp-exporter-base';
import type { IExporterMetricsHelper, IExportTraceServiceResponse, ISerializer } from '@opentelemetry/otlp-transformer';
import type { TraceRequestBatch } from './otlp-json-batch.js';
import { otlpHttpDelegate } from './otlp-http-delegate.js';
import { OtlpJsonTraceSerializer } from './otlp-json-spans.js';

/** The component type the SDK's own OTLP/HTTP span exporter reports itself as (semconv `otel.component.type`). */
const COMPONENT_TYPE = 'otlp_http_span_exporter';

/** The SDK's span counting for its exporter metrics (`TraceExporterMetricsHelper`), over a request's spans. */
const BATCH_METRICS: IExporterMetricsHelper<TraceRequestBatch> = { name: 'span', countItems: (batch) => batch.count };

export class OtlpJsonTraceExporter extends OTLPExporterBase<TraceRequestBatch> {
  /** The SDK exporter's config: `url`, `headers`, `timeoutMillis`, `compression`, `concurrencyLimit`, … */
  constructor(config: OTLPExporterNodeConfigBase = {}) {
    super(otlpHttpDelegate(config, { id: 'TRACES', path: 'v1/traces', componentType: COMPONENT_TYPE, serializer: BATCH_SERIALIZER, metricsHelper: BATCH_METRICS }));
  }

  /** The SDK's export of one written request; its buffer goes back when the result is known (the transport, retries included, is then done with it). */
  override export(batch: TraceRequestBatch, done: (result: ExportResult) => void): void {
    super.export(batch, (result) => {
      batch.release();
      done(result);
    });
  }
}

/** The request is already written: its bytes are the body. The collector's answer is read as the JSON serializer reads it. */
const BATCH_SERIALIZER: ISerializer<TraceRequestBatch, IExportTraceServiceResponse> = {
  serializeRequest: (batch) => batch.bytes(),
  deserializeResponse: (data) => OtlpJsonTraceSerializer.deserializeResponse(data),
};
