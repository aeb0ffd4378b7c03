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
 * (the audit's close at shutdown) exports what is pending. Records lost are told to `dropped`
 * (ops/audit-drops.ts: counted and logged): those of an export that failed after the exporter's
 * retries, those refused while {@link AUDIT_QUEUE_SIZE} wait (a collector slower than the calls,
 * or away), and those that come after the close.
 */
import { SeverityNumber, type AnyValueMap } from '@opentelemetry/api-logs';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { JsonLogsSerializer, LogsExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import type { Resource } from '@opentelemetry/resources';
import { ExportResultCode } from '@opentelemetry/core';
import { BatchLogRecordProcessor, LoggerProvider, type LogRecordExporter, type ReadableLogRecord } from '@opentelemetry/sdk-logs';
import type { AuditSink } from '../ops/audit.js';
import type { AuditDrops } from '../ops/audit-drops.js';
import { otlpHttpDelegate } from './otlp-http-delegate.js';

export const AUDIT_EVENT_NAME = 'switchboard.audit';

/**
 * The most records waiting for an export. The SDK's batch processor holds as many (its
 * `maxQueueSize`, given the same) and drops the next without a word; here the record is refused
 * first and told to `dropped` as `queue_full`, so the processor itself never drops one.
 */
const AUDIT_QUEUE_SIZE = 2048;

export function createAuditLogSink(endpoint: string, headers: Record<string, string>, resource: Resource, version: string, dropped: AuditDrops = () => {}): AuditSink {
  // Records handed to the processor and not yet to an export: the processor's own queue, counted.
  let waiting = 0;
  let closed = false;
  const exporter = countedExporter(otlpLogExporter(`${endpoint}/v1/logs`, headers), dropped, (taken) => (waiting -= taken));
  const provider = new LoggerProvider({ resource, processors: [new BatchLogRecordProcessor({ exporter, maxQueueSize: AUDIT_QUEUE_SIZE })] });
  const logger = provider.getLogger('switchboard.audit', version);
  return {
    write: () => {
      throw new Error('the OTLP audit sink takes records (writeRecord), not lines');
    },
    writeRecord: (record) => {
      if (closed) return void dropped('closed', 1);
      if (waiting >= AUDIT_QUEUE_SIZE) return void dropped('queue_full', 1);
      waiting++;
      const body: AnyValueMap = {};
      for (const [key, value] of Object.entries(record)) if (value !== undefined) body[key] = value as AnyValueMap[string];
      const time = typeof record.time === 'string' ? new Date(record.time) : new Date();
      logger.emit({ eventName: AUDIT_EVENT_NAME, severityNumber: SeverityNumber.INFO, severityText: 'INFO', timestamp: time, body });
    },
    end: (done?: () => void) => {
      closed = true;
      // Shutting down exports what the batch holds first.
      provider.shutdown().then(() => done?.(), () => done?.());
    },
  };
}

/** `exporter`, told `taken` as each export takes its records, and the records of each export that failed told to `dropped`. */
function countedExporter(exporter: LogRecordExporter, dropped: AuditDrops, taken: (records: number) => void): LogRecordExporter {
  return {
    export: (records, done) => {
      taken(records.length);
      exporter.export(records, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) dropped('export_failed', records.length, result.error);
        done(result);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

/** The SDK's `OTLPLogExporter` (this base over its own delegate), sending through undici (otlp-http-delegate.ts). */
function otlpLogExporter(url: string, headers: Record<string, string>): OTLPExporterBase<ReadableLogRecord[]> {
  const signal = { id: 'LOGS', path: 'v1/logs', componentType: 'otlp_http_log_exporter', serializer: JsonLogsSerializer, metricsHelper: LogsExporterMetricsHelper } as const;
  return new OTLPExporterBase(otlpHttpDelegate({ url, headers }, signal));
}
