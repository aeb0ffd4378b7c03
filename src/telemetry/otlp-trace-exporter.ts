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
 * The body is written into a buffer lent for that export and given back when the export has
 * settled — its result reported, so the transport (retries included) is done with the body — to
 * be written again by a later export (utf8-batch-writer.ts says why: a fresh buffer per batch
 * cost more than the encoding). An export the span queue gave up on keeps its buffer until the
 * SDK settles it; the next export gets another.
 *
 * OTLP/HTTP with JSON payloads: https://opentelemetry.io/docs/specs/otlp/#otlphttp-request
 * (a POST to `/v1/traces` of an `ExportTraceServiceRequest`, `Content-Type: application/json`).
 */
import type { ExportResult } from '@opentelemetry/core';
import { OTLPExporterBase, type OTLPExporterNodeConfigBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { TraceExporterMetricsHelper, type IExportTraceServiceResponse, type ISerializer } from '@opentelemetry/otlp-transformer';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { EncodableSpan } from './recorded-span.js';
import { OtlpJsonTraceSerializer, writeTraceRequest } from './otlp-json-spans.js';
import { RequestBuffers, Utf8BatchWriter } from './utf8-batch-writer.js';

/** The component type the SDK's own OTLP/HTTP span exporter reports itself as (semconv `otel.component.type`). */
const COMPONENT_TYPE = 'otlp_http_span_exporter';

export class OtlpJsonTraceExporter extends OTLPExporterBase<EncodableSpan[]> implements SpanExporter {
  readonly #serializer: LendingSerializer;

  /** The SDK exporter's config: `url`, `headers`, `timeoutMillis`, `compression`, `concurrencyLimit`, … */
  constructor(config: OTLPExporterNodeConfigBase = {}) {
    const options = convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' });
    const serializer = new LendingSerializer();
    super(createOtlpHttpExportDelegate(options, serializer, COMPONENT_TYPE, TraceExporterMetricsHelper, config.selfObsMeterProvider));
    this.#serializer = serializer;
  }

  /** The SDK's export; the body's buffer goes back once, when the result is known (it may be known before this returns). */
  override export(spans: EncodableSpan[], done: (result: ExportResult) => void): void {
    let settled = false;
    let lent: Buffer | undefined;
    const giveBack = () => {
      if (lent) this.#serializer.giveBack(lent);
      lent = undefined;
    };
    super.export(spans, (result) => {
      settled = true;
      giveBack();
      done(result);
    });
    lent = this.#serializer.takeLast();
    if (settled) giveBack();
  }
}

/** Writes each request into a buffer of its {@link RequestBuffers}; the exporter takes it with {@link takeLast} and gives it back. */
class LendingSerializer implements ISerializer<EncodableSpan[], IExportTraceServiceResponse> {
  readonly #buffers = new RequestBuffers();
  #last: Buffer | undefined;

  serializeRequest(spans: EncodableSpan[]): Uint8Array {
    const writer = new Utf8BatchWriter(this.#buffers.take());
    writeTraceRequest(spans, (text) => writer.write(text));
    this.#last = writer.buffer;
    return writer.view();
  }

  deserializeResponse(data: Uint8Array): IExportTraceServiceResponse {
    return OtlpJsonTraceSerializer.deserializeResponse(data);
  }

  /** The buffer of the request written last, now the exporter's to give back; undefined when none was written since. */
  takeLast(): Buffer | undefined {
    const last = this.#last;
    this.#last = undefined;
    return last;
  }

  giveBack(buffer: Buffer): void {
    this.#buffers.give(buffer);
  }
}
