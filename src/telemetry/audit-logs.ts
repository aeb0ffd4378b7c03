/**
 * `audit.sink: otlp` (issue 30 §2 "Sinks"): each audit record as an OTLP log record, exported
 * over OTLP/HTTP to `{telemetry.otlp.endpoint}/v1/logs` with the telemetry's headers, by the
 * SDK's batch processor and its OTLP/HTTP log exporter (sending through undici:
 * otlp-http-delegate.ts). Loaded (by a dynamic import from otel-sdk.ts) only when that sink is
 * configured.
 *
 * The record is the log body, as a map with the same fields as the JSON line of the other
 * sinks (docs/policy-and-audit.md; absent fields left out); the event name is
 * `switchboard.audit`, the severity INFO, the timestamp the record's `time`. Ending the sink
 * (the audit's close at shutdown) exports what is pending.
 */
import { SeverityNumber, type AnyValueMap } from '@opentelemetry/api-logs';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { JsonLogsSerializer, LogsExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import type { Resource } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider, type ReadableLogRecord } from '@opentelemetry/sdk-logs';
import type { AuditSink } from '../ops/audit.js';
import { otlpHttpDelegate } from './otlp-http-delegate.js';

export const AUDIT_EVENT_NAME = 'switchboard.audit';

export function createAuditLogSink(endpoint: string, headers: Record<string, string>, resource: Resource, version: string): AuditSink {
  const provider = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter: otlpLogExporter(`${endpoint}/v1/logs`, headers) })] });
  const logger = provider.getLogger('switchboard.audit', version);
  return {
    write: () => {
      throw new Error('the OTLP audit sink takes records (writeRecord), not lines');
    },
    writeRecord: (record) => {
      const body: AnyValueMap = {};
      for (const [key, value] of Object.entries(record)) if (value !== undefined) body[key] = value as AnyValueMap[string];
      const time = typeof record.time === 'string' ? new Date(record.time) : new Date();
      logger.emit({ eventName: AUDIT_EVENT_NAME, severityNumber: SeverityNumber.INFO, severityText: 'INFO', timestamp: time, body });
    },
    end: (done?: () => void) => {
      // Shutting down exports what the batch holds first.
      provider.shutdown().then(() => done?.(), () => done?.());
    },
  };
}

/** The SDK's `OTLPLogExporter` (this base over its own delegate), sending through undici (otlp-http-delegate.ts). */
function otlpLogExporter(url: string, headers: Record<string, string>): OTLPExporterBase<ReadableLogRecord[]> {
  const signal = { id: 'LOGS', path: 'v1/logs', componentType: 'otlp_http_log_exporter', serializer: JsonLogsSerializer, metricsHelper: LogsExporterMetricsHelper } as const;
  return new OTLPExporterBase(otlpHttpDelegate({ url, headers }, signal));
}
