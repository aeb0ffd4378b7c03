/**
 * `audit.sink: file` (issue 30 §2; docs/policy-and-audit.md): the records appended to
 * `audit.path` in batches, with the access log's buffer (log-buffer.ts): the records of one
 * turn of the event loop leave together in one write(2) at its end (or as soon as about 4 KiB
 * are held), rather than one asynchronous write per record (issue 44 part 1: with an
 * `fs.WriteStream` each record was a write of its own through libuv's thread pool, a futex
 * wake-up there and an eventfd signal back per record). A record is on disk once the turn that
 * made it is over, as before it was once its write came back, so nothing reading the file
 * sees it later than it did.
 *
 * The file is opened O_APPEND (mode 0640), so appends continue at its end after a rotation by
 * truncation (logrotate `copytruncate`). What is held is written when the audit closes (a
 * reload that changes `audit`, the graceful shutdown) and on the process's exit. A write that
 * fails drops its batch: the audit must never take the gateway down.
 */
import { closeSync, openSync } from 'node:fs';
import type { AuditSink } from './audit.js';
import { LineBuffer } from './log-buffer.js';

export function openAuditFile(path: string): AuditSink {
  const fd = openSync(path, 'a', 0o640);
  const buffer = new LineBuffer(fd);
  let due: NodeJS.Immediate | undefined;
  const flush = (): void => {
    due = undefined;
    try {
      buffer.flushSync();
    } catch {}
  };
  process.on('exit', flush);
  let closed = false;
  return {
    write: (line: string) => {
      // Once closed its descriptor may be another file's: a late record is dropped.
      if (closed) return false;
      due ??= setImmediate(flush);
      return buffer.write(line);
    },
    end: (done?: () => void) => {
      if (!closed) {
        closed = true;
        if (due) clearImmediate(due);
        process.off('exit', flush);
        flush();
        closeSync(fd);
      }
      done?.();
    },
  };
}
