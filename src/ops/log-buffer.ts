/**
 * The process's stdout for log lines, one per process (however many apps it builds): lines
 * leave in writes of about 4 KiB, or after at most 250 ms on a quiet gateway, rather than a
 * system call each. With an access line per request that is most of what logging at `info`
 * costs (issue 16: `bench:compare --log-level info`, CPU per call against the commit before
 * 0.88 without the buffer, 0.71 with it).
 *
 * Lines are kept as the strings they are and joined and encoded once, when the batch leaves.
 * pino's `destination({ minLength })` (sonic-boom), used before, measured the UTF-8 length of
 * everything it held before appending each line (`Buffer.byteLength` of the pending string,
 * flattened anew each time): a pass over up to 4 KiB per access line, about 2 % of a proxied
 * call (issue 29).
 *
 * The writes are synchronous, as Node's own `process.stdout` is on a pipe or file on Linux:
 * an asynchronous write goes through libuv's thread pool, which costs a futex wake-up of a
 * pool thread and an eventfd signal back to the main thread per write (with a 4 KiB buffer,
 * one write per ~14 access lines; on a VM each wake-up of another vCPU is a hypervisor
 * exit), where a write(2) of 4 KiB to a pipe takes a few µs. The price is the one Node's
 * stdout has: a log reader that stops reading stalls the process once the pipe is full
 * (a full non-blocking pipe is waited on, as sonic-boom waits), instead of the lines piling
 * up in memory. The buffer is written out on exit (a crash included); only a SIGKILL loses
 * the last 250 ms of lines. A write that fails otherwise (stdout closed) drops its batch:
 * logging must never take the gateway down.
 */
import { writeSync } from 'node:fs';

/** Lines gathered up to about this many characters leave in one write (pino's advice for throughput). */
const LOG_BUFFER_CHARS = 4096;
/** A quiet gateway's lines wait at most this long for the buffer to fill. */
const LOG_FLUSH_MS = 250;
/** How long to wait before writing again to a full pipe (EAGAIN). */
const FULL_PIPE_WAIT_MS = 10;

/** Lines for one file descriptor, written when about `minChars` have gathered or when flushed. */
export class LineBuffer {
  #lines: string[] = [];
  #chars = 0;

  /** `dropped`: told how many lines a failed write lost (the audit file's, audit-drops.ts); the log's own has nowhere to tell. */
  constructor(
    private readonly fd: number,
    private readonly minChars = LOG_BUFFER_CHARS,
    private readonly dropped?: (lines: number, error: unknown) => void,
  ) {}

  /** Keeps the line; writes the batch once it is big enough. */
  write(line: string): boolean {
    this.#lines.push(line);
    this.#chars += line.length;
    if (this.#chars >= this.minChars) {
      try {
        this.flushSync();
      } catch {}
    }
    return true;
  }

  /** Writes what is kept, now; throws when the write fails (the batch is dropped). */
  flushSync(): void {
    if (!this.#lines.length) return;
    const lines = this.#lines.length;
    const text = lines === 1 ? this.#lines[0]! : this.#lines.join('');
    this.#lines = [];
    this.#chars = 0;
    try {
      writeWhole(this.fd, Buffer.from(text, 'utf8'));
    } catch (err) {
      this.dropped?.(lines, err);
      throw err;
    }
  }

  /** pino's `logger.flush(cb)` asks streams for this. */
  flush(done?: (err?: Error) => void): void {
    try {
      this.flushSync();
      done?.();
    } catch (err) {
      done?.(err as Error);
    }
  }
}

/** Writes all of `bytes`, after a short write or a full non-blocking pipe too (the audit file's synchronous flush uses it as well). */
export function writeWhole(fd: number, bytes: Buffer): void {
  for (let offset = 0; offset < bytes.length; ) {
    try {
      offset += writeSync(fd, bytes, offset, bytes.length - offset);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, FULL_PIPE_WAIT_MS);
    }
  }
}

let stdout: LineBuffer | undefined;

/** The process's buffered stdout, flushed every {@link LOG_FLUSH_MS} and on exit. */
export function bufferedStdout(): LineBuffer {
  if (stdout) return stdout;
  const buffer = new LineBuffer(1);
  // A flush that fails (stdout gone) has nowhere to report to.
  const flush = (): void => {
    try {
      buffer.flushSync();
    } catch {}
  };
  setInterval(flush, LOG_FLUSH_MS).unref();
  process.on('exit', flush);
  return (stdout = buffer);
}
