/**
 * `audit.sink: file` (issue 30 §2; docs/policy-and-audit.md): the records appended to
 * `audit.path` in batches. A batch leaves once about 64 KiB are held or `audit.flushInterval`
 * (default 100 ms) after its first record, whichever comes first, in one write(2) made off the
 * event loop (libuv's thread pool), one batch at a time, in order.
 *
 * Why batches on a timer (issue 44 part 1): the records of an event-loop turn used to leave at
 * its end, and under load a turn holds about one record, so that was a write(2) per record.
 * Why off the event loop: an append to a file can block — on this machine's ext4, under other
 * processes' disk traffic, a 4 KiB append held the calling thread for 0.3–0.5 ms (strace of the
 * governed gateway under load), where the same write to a pipe took 40 µs — and a gateway must
 * not stop serving every connection while the disk catches up. (The access log stays
 * synchronous: it goes to a pipe, log-buffer.ts says why.)
 *
 * The price is how late a record reaches the file: at most the interval plus the write, so a
 * SIGKILL loses at most that much. `flushInterval: 0` keeps the former behaviour — a
 * synchronous write at the end of each turn — for operators who want each record on disk as
 * soon as its turn is over.
 *
 * The file is opened O_APPEND (mode 0640), so appends continue at its end after a rotation by
 * truncation (logrotate `copytruncate`). Closing the audit (a reload that changes `audit`, the
 * graceful shutdown) waits for the write in flight, then writes what is held; the process's
 * exit writes what is held (a write in flight then is the thread pool's). A write that fails
 * drops its batch: the audit must never take the gateway down. The records it held are told to
 * `dropped` (audit-drops.ts: counted and logged), as is a record that comes after the close.
 */
import { closeSync, openSync, write } from 'node:fs';
import type { AuditSink } from './audit.js';
import { linesIn, type AuditDrops } from './audit-drops.js';
import { LineBuffer, writeWhole } from './log-buffer.js';
import { RequestBuffers, Utf8BatchWriter } from './utf8-batch-writer.js';

/**
 * A batch leaves at once when it holds about this many bytes. 64 KiB, not the access log's
 * 4 KiB: each batch is a hand-off to the thread pool and back, and at 4 KiB a loaded gateway
 * (about 2,000 calls/s, records of about 450 bytes) made one every nine records. Measured with
 * `audit` alone, chunked JSON, 16 connections, CPU of the gateway's threads other than the main
 * one, per call: about 21 µs above the plain gateway at 4 KiB, 7 µs at 64 KiB (issue 44,
 * docs/performance.md). The interval still bounds how late a record is; this bounds the batch.
 */
const BATCH_BYTES = 64 * 1024;

type AuditFileSink = AuditSink & Required<Pick<AuditSink, 'end'>>;

/** `dropped`: told of the records a failed write loses, and of those that come after the close. */
export function openAuditFile(path: string, flushIntervalMs: number, dropped: AuditDrops = () => {}): AuditFileSink {
  const fd = openSync(path, 'a', 0o640);
  return flushIntervalMs > 0 ? new BatchedAuditFile(fd, flushIntervalMs, dropped) : turnAuditFile(fd, dropped);
}

/** `flushInterval: 0`: the records of a turn written synchronously at its end. */
function turnAuditFile(fd: number, dropped: AuditDrops): AuditFileSink {
  const buffer = new LineBuffer(fd, undefined, (lines, error) => dropped('write_failed', lines, error));
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
      if (closed) {
        dropped('closed', 1);
        return false;
      }
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

/**
 * Batches of {@link BATCH_BYTES} or `intervalMs`, each written asynchronously, one at a time. A
 * record is copied into the batch's buffer as it comes, so what waits for the write is bytes
 * outside the JavaScript heap: a batch held as strings (each record's line a concatenation of a
 * few dozen parts) survived the young generation's collections and was copied by each, and was
 * joined and encoded again at the write (issue 44 part 1).
 */
class BatchedAuditFile implements AuditFileSink {
  /** Two buffers: one being filled while the other's write is in flight. */
  readonly #buffers = new RequestBuffers(2);
  #batch = new Utf8BatchWriter(this.#buffers.take());
  #timer: NodeJS.Timeout | undefined;
  #writing = false;
  #closed = false;
  /** Called once the write in flight is over (a close waiting for it). */
  #idle: (() => void) | undefined;
  readonly #onExit = (): void => this.#flushSync();

  constructor(
    private readonly fd: number,
    private readonly intervalMs: number,
    private readonly dropped: AuditDrops,
  ) {
    process.on('exit', this.#onExit);
  }

  write(line: string): boolean {
    const batch = this.batch();
    if (!batch) return false;
    batch.write(line);
    this.added();
    return true;
  }

  /**
   * Where the next record's line goes (ops/audit.ts writes it directly); none once closed: the
   * descriptor may be another file's, so the record is dropped, and told to `dropped` here, for
   * `write` and the audit alike.
   */
  batch(): Utf8BatchWriter | undefined {
    if (!this.#closed) return this.#batch;
    this.dropped('closed', 1);
    return undefined;
  }

  /** A record was added: the batch leaves now if full, else on its timer. */
  added(): void {
    if (this.#batch.length >= BATCH_BYTES) this.#flush();
    else this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, this.intervalMs).unref();
  }

  end(done?: () => void): void {
    if (this.#closed) return void done?.();
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const finish = (): void => {
      process.off('exit', this.#onExit);
      this.#flushSync();
      closeSync(this.fd);
      done?.();
    };
    if (this.#writing) this.#idle = finish;
    else finish();
  }

  /** The held batch to the thread pool, unless one is in flight (then it follows that one). */
  #flush(): void {
    if (this.#writing || !this.#batch.length) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#writing = true;
    const batch = this.#take();
    this.#writeAll(batch, batch.view(), 0);
  }

  #writeAll(batch: Utf8BatchWriter, bytes: Buffer, offset: number): void {
    write(this.fd, bytes, offset, bytes.length - offset, null, (err, written) => {
      if (!err && offset + written < bytes.length) return this.#writeAll(batch, bytes, offset + written);
      // The records not wholly written are lost (a record cut short by the failure with them).
      if (err) this.dropped('write_failed', linesIn(bytes, offset), err);
      this.#buffers.give(batch.buffer);
      this.#writing = false;
      if (this.#idle) return this.#idle();
      // What came meanwhile: at once if a batch is full or its timer already went off, else on its timer.
      if (this.#batch.length && (this.#batch.length >= BATCH_BYTES || !this.#timer)) this.#flush();
    });
  }

  /** What is held, now (a close, the process's exit); a failed write drops it. */
  #flushSync(): void {
    if (!this.#batch.length) return;
    const batch = this.#take();
    try {
      writeWhole(this.fd, batch.view());
    } catch (err) {
      this.dropped('write_failed', linesIn(batch.view()), err);
    }
    this.#buffers.give(batch.buffer);
  }

  /** The batch held, and a new one started in the other buffer. */
  #take(): Utf8BatchWriter {
    const held = this.#batch;
    this.#batch = new Utf8BatchWriter(this.#buffers.take());
    return held;
  }
}
