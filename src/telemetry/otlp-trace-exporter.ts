/**
 * The gateway's OTLP/HTTP span exporter (issue 44 part 1): the SDK's `OTLPTraceExporter`
 * (@opentelemetry/exporter-trace-otlp-http) with one part changed, the encoder. It is assembled
 * exactly as that class assembles itself — `OTLPExporterBase` over `createOtlpHttpExportDelegate`
 * with the options `convertLegacyHttpOptions` makes of the same config (signal `TRACES`, path
 * `v1/traces`, `Content-Type: application/json`), the SDK's span counting for its own exporter
 * metrics — all from the public entry points of @opentelemetry/otlp-exporter-base. So the
 * transport, the retries (with backoff, until the timeout), the timeout, the headers, the
 * compression, the HTTP agent and the concurrency limit stay the SDK's; only the request body is
 * written by otlp-json-spans.ts, the same OTLP/JSON document at a fraction of the CPU.
 *
 * OTLP/HTTP with JSON payloads: https://opentelemetry.io/docs/specs/otlp/#otlphttp-request
 * (a POST to `/v1/traces` of an `ExportTraceServiceRequest`, `Content-Type: application/json`).
 */
import { OTLPExporterBase, type OTLPExporterNodeConfigBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { OtlpJsonTraceSerializer } from './otlp-json-spans.js';

/** The component type the SDK's own OTLP/HTTP span exporter reports itself as (semconv `otel.component.type`). */
const COMPONENT_TYPE = 'otlp_http_span_exporter';

export class OtlpJsonTraceExporter extends OTLPExporterBase<ReadableSpan[]> implements SpanExporter {
  /** The SDK exporter's config: `url`, `headers`, `timeoutMillis`, `compression`, `concurrencyLimit`, … */
  constructor(config: OTLPExporterNodeConfigBase = {}) {
    const options = convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' });
    super(createOtlpHttpExportDelegate(options, OtlpJsonTraceSerializer, COMPONENT_TYPE, TraceExporterMetricsHelper, config.selfObsMeterProvider));
  }
}
