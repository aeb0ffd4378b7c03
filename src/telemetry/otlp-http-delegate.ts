/**
 * An OTLP/HTTP exporter's delegate as the SDK's exporters make theirs (`createOtlpHttpExportDelegate`),
 * but sending through undici (otlp-undici-transport.ts says why) with the SDK's retries kept
 * (otlp-retries.ts). The options are the SDK's own merge of the code's config, the
 * `OTEL_EXPORTER_OTLP_*` environment and the defaults (`convertLegacyHttpOptions`: URL, headers,
 * timeout, compression, concurrency limit); the bounded queue of exports in flight and the SDK's
 * exporter metrics are the SDK's. Used for the spans (otlp-trace-exporter.ts), the duration
 * histograms ({@link otlpMetricExporter}) and `audit.sink: otlp` (audit-logs.ts).
 */
import { AggregationTemporalityPreference, OTLPMetricExporterBase } from '@opentelemetry/exporter-metrics-otlp-http';
import { createOtlpNetworkExportDelegate, type IOtlpExportDelegate, type OTLPExporterNodeConfigBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExporterMetrics } from '@opentelemetry/otlp-exporter-base/node-http';
import { JsonMetricsSerializer, MetricsExporterMetricsHelper, type IExporterMetricsHelper, type ISerializer } from '@opentelemetry/otlp-transformer';
import { packageVersion } from '../ops/version.js';
import { RetryingOtlpTransport } from './otlp-retries.js';
import { UndiciOtlpTransport, type OtlpTls } from './otlp-undici-transport.js';

/** The SDK's merged options for an OTLP/HTTP exporter (its `OtlpNodeHttpConfiguration`, not exported by name). */
export type SdkHttpOptions = ReturnType<typeof convertLegacyHttpOptions>;

/** Which signal, its path under the endpoint, and how the SDK's exporter of it names itself (semconv `otel.component.type`). */
export interface OtlpSignal<Internal, Response> {
  id: 'TRACES' | 'METRICS' | 'LOGS';
  path: 'v1/traces' | 'v1/metrics' | 'v1/logs';
  componentType: string;
  serializer: ISerializer<Internal, Response>;
  metricsHelper: IExporterMetricsHelper<Internal>;
}

export function otlpHttpDelegate<Internal, Response>(config: OTLPExporterNodeConfigBase, signal: OtlpSignal<Internal, Response>): IOtlpExportDelegate<Internal> {
  const options = convertLegacyHttpOptions(config, signal.id, signal.path, { 'Content-Type': 'application/json' });
  const transport = undiciTransportOf(options);
  const metrics = createOtlpHttpExporterMetrics(signal.componentType, signal.metricsHelper, options.url, config.selfObsMeterProvider);
  return createOtlpNetworkExportDelegate(options, signal.serializer, metrics, new RetryingOtlpTransport(transport));
}

/** The transport for the SDK's merged options: its URL, headers and compression, and the TLS material its https agent would have had. */
export function undiciTransportOf(options: SdkHttpOptions): UndiciOtlpTransport {
  // The SDK's agent for https is made only to read its TLS options (the certificate files of the environment); it connects nothing.
  const tls = async (): Promise<OtlpTls> => ((await options.agentFactory('https:')) as { options?: OtlpTls }).options ?? {};
  return new UndiciOtlpTransport({ url: options.url, headers: options.headers, compression: options.compression, userAgent: `switchboard/${packageVersion()}`, tls });
}

/**
 * The SDK's OTLP/HTTP metric exporter (`OTLPMetricExporter` is this base over its own delegate),
 * sending through undici (otlp-http-delegate.ts), cumulative as the histograms are.
 */
export function otlpMetricExporter(url: string, headers: Record<string, string>): OTLPMetricExporterBase {
  const signal = { id: 'METRICS', path: 'v1/metrics', componentType: 'otlp_http_metric_exporter', serializer: JsonMetricsSerializer, metricsHelper: MetricsExporterMetricsHelper } as const;
  return new OTLPMetricExporterBase(otlpHttpDelegate({ url, headers }, signal), { temporalityPreference: AggregationTemporalityPreference.CUMULATIVE });
}
