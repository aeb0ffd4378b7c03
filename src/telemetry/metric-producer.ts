/**
 * The gateway's own histograms (duration-histogram.ts) handed to the SDK's export: a
 * `MetricProducer` given to the `PeriodicExportingMetricReader` (`metricProducers`), whose
 * `collect` the reader calls beside the SDK's own at each export and whose scope metrics it
 * appends to the SDK's, under the SDK's resource (`MetricReader.collect`). The OpenTelemetry
 * metrics SDK specification's "MetricProducer"
 * (https://opentelemetry.io/docs/specs/otel/metrics/sdk/#metricproducer): a bridge for
 * metrics aggregated outside the SDK, read by the same reader and exporter — so the OTLP/HTTP
 * export, its interval, retries and the flush at shutdown stay the SDK's.
 *
 * One scope, the one the SDK's meter had (`getMeter(name, version)`), left out, as the SDK
 * leaves a meter out, while none of its histograms has a point; always cumulative temporality
 * (the OTLP exporter's default, which the gateway keeps).
 */
import { millisToHrTime, type InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { CollectionResult, MetricData, MetricProducer } from '@opentelemetry/sdk-metrics';
import type { DurationHistogram } from './duration-histogram.js';

export class HistogramProducer implements MetricProducer {
  /** The scope as the SDK's `MeterProvider.getMeter` records it (`schemaUrl` present and undefined). */
  readonly scope: InstrumentationScope;

  constructor(
    scope: { name: string; version: string },
    private readonly histograms: readonly DurationHistogram[],
    /** Not exported: the reader keeps the SDK's resource; here because a collection result carries one. */
    private readonly resource: Resource,
  ) {
    this.scope = { name: scope.name, version: scope.version, schemaUrl: undefined };
  }

  async collect(): Promise<CollectionResult> {
    const endTime = millisToHrTime(Date.now());
    const metrics: MetricData[] = [];
    for (const histogram of this.histograms) {
      const metric = histogram.collect(endTime);
      if (metric) metrics.push(metric);
    }
    return { resourceMetrics: { resource: this.resource, scopeMetrics: metrics.length > 0 ? [{ scope: this.scope, metrics }] : [] }, errors: [] };
  }
}
