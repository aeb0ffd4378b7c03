/**
 * Audit records a sink could not take, said out loud (issue 44 part 1). The file sink writes its
 * batches off the event loop, and a write that fails — a full disk, an I/O error — drops the
 * batch, since the audit must never take the gateway down (audit-file.ts); the OTLP sink's export
 * can fail after its retries, and its queue fills while the collector is slow or away; a call
 * whose answer passes after the audit closed at shutdown has no sink left. Each of these lost
 * records without a word before. An audit trail that loses
 * records must say so, and say how many:
 *
 * - counted in `switchboard_audit_records_dropped_total{sink, reason}` (reason `write_failed`,
 *   `export_failed`, `queue_full` or `closed`), which the chart's `SwitchboardAuditRecordsDropped`
 *   alert watches;
 * - logged at error level, at once for the first loss of a sink and reason, then at most once a
 *   minute with the records lost since: a full disk fails every batch, ten times a second, and a
 *   log line each time would add to what fills it.
 *
 * Only the count, the reason and the error's code go to the log: never a record (it may hold a
 * tool's arguments), nor an error's message.
 */
import type { Counter } from 'prom-client';

/** The sinks that can tell of a loss (stdout's are the platform's: the process cannot see past its own output). */
export type AuditSinkName = 'file' | 'otlp';
export type AuditDropReason = 'write_failed' | 'export_failed' | 'queue_full' | 'closed';

/** Told of `records` records one sink lost, and why. */
export type AuditDrops = (reason: AuditDropReason, records: number, error?: unknown) => void;

/** What a loss is logged through (the app's logger). */
export interface DropLog {
  error(fields: Record<string, unknown>, message: string): void;
}

/** Losses of one sink and reason are logged at most this often after the first. */
export const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * The reporter for each sink: counts into `counter`, logs through `log`. `now` is the clock the
 * log's interval is measured by (tests pass their own).
 */
export function auditDropReporter(counter: Counter<'sink' | 'reason'>, log: DropLog, now: () => number = Date.now): (sink: AuditSinkName) => AuditDrops {
  const logged = new Map<string, { at: number; unlogged: number }>();
  return (sink) => (reason, records, error) => {
    if (records <= 0) return;
    counter.inc({ sink, reason }, records);
    const key = `${sink} ${reason}`;
    const last = logged.get(key);
    const time = now();
    if (last && time - last.at < DROP_LOG_INTERVAL_MS) {
      last.unlogged += records;
      return;
    }
    const lost = records + (last?.unlogged ?? 0);
    logged.set(key, { at: time, unlogged: 0 });
    log.error({ sink, reason, records: lost, ...(last ? { sinceMs: time - last.at } : {}), error: errorCode(error) }, 'audit records lost');
  };
}

/**
 * An error's code (`ENOSPC`, an HTTP status) or else its name, never its message: an export's
 * message may quote the endpoint, whose URL may carry credentials.
 */
function errorCode(error: unknown): string | undefined {
  if (error === undefined || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' || typeof code === 'number') return String(code);
  return error instanceof Error ? error.name : typeof error;
}

/** How many whole records (lines) a batch holds from `from` on: its newlines. */
export function linesIn(bytes: Buffer, from = 0): number {
  let count = 0;
  for (let i = bytes.indexOf(0x0a, from); i >= 0; i = bytes.indexOf(0x0a, i + 1)) count++;
  return count;
}
