/**
 * The Fastify instance's options: logging, body limit, request ids, the body read timeout
 * and the trusted proxies. Kept apart from the wiring in app.ts because each choice here is a hot-path or
 * robustness decision with its own reason.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyServerOptions } from 'fastify';
import type { Config } from '../config/schema.js';
import { destination, pino } from 'pino';
import { AccessLog, type LineSink } from '../ops/access-log.js';
import { loggerOptions } from '../ops/logger.js';
import { requestLoggerFactory } from '../ops/request-logger.js';
import { bodyTimeoutOptions } from './body-timeout.js';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
/**
 * Request ids only need to be unique for log correlation: a random per-process prefix and a
 * counter, instead of a random UUID per request (crypto on the hot path).
 */
const REPLICA_PREFIX = randomUUID().slice(0, 8);
let requestCounter = 0;

export function serverOptions(config: Config, logStream?: NodeJS.WritableStream): FastifyServerOptions {
  return {
    ...loggingOptions(config.log.level, logStream),
    bodyLimit: config.limits.maxBodyBytes,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : `${REPLICA_PREFIX}-${(requestCounter++).toString(36)}`;
    },
    // The body read timeout (`limits.bodyTimeout`, issue 13): Node's requestTimeout bounds the
    // time until the whole request has *arrived* (then 408 and the socket closed); it never
    // applies to the response, so long SSE answers are not cut (see body-timeout.ts).
    ...bodyTimeoutOptions(config.limits.bodyTimeout),
    return503OnClosing: true,
    // `request.ip` from the trusted proxies' X-Forwarded-For (config/trust-proxy-schema.ts); the socket's otherwise.
    ...(config.listen.trustProxy !== undefined ? { trustProxy: config.listen.trustProxy } : {}),
  };
}

/**
 * With logging off, no logger at all: Fastify would otherwise still make a logger for every
 * request (measurable on the hot path, see bench/README.md). With logging on: one access
 * line per request (ops/access-log.ts), request loggers that make a pino child only when a
 * request writes a line of its own (ops/request-logger.ts), and stdout buffered (below).
 */
function loggingOptions(level: string, logStream?: NodeJS.WritableStream): FastifyServerOptions {
  if (level === 'silent') return { logger: false };
  const stream = logStream ?? bufferedStdout();
  return {
    loggerInstance: pino(loggerOptions(level), stream),
    logController: new AccessLog(stream as LineSink, level),
    childLoggerFactory: requestLoggerFactory,
  };
}

/** Lines gathered up to this many bytes leave in one write (pino's advice for throughput). */
const LOG_BUFFER_BYTES = 4096;
/** A quiet gateway's lines wait at most this long for the buffer to fill. */
const LOG_FLUSH_MS = 250;

let stdout: ReturnType<typeof destination> | undefined;

/**
 * The process's stdout for log lines, one per process (however many apps it builds): lines
 * leave in writes of about 4 KiB, or after at most 250 ms on a quiet gateway, rather than a
 * system call each. With an access line per request that is most of what logging at `info`
 * costs (issue 16: `bench:compare --log-level info`, CPU per call against the commit before
 * 0.88 without the buffer, 0.71 with it).
 *
 * The writes are synchronous, as Node's own `process.stdout` is on a pipe or file on Linux:
 * an asynchronous write goes through libuv's thread pool, which costs a futex wake-up of a
 * pool thread and an eventfd signal back to the main thread per write (with a 4 KiB buffer,
 * one write per ~14 access lines; on a VM each wake-up of another vCPU is a hypervisor
 * exit), where a write(2) of 4 KiB to a pipe takes a few µs. The price is the one Node's
 * stdout has: a log reader that stops reading stalls the process once the pipe is full,
 * instead of the lines piling up in memory. The buffer is written out on exit (a crash
 * included); only a SIGKILL loses the last 250 ms of lines.
 */
function bufferedStdout(): ReturnType<typeof destination> {
  if (stdout) return stdout;
  const stream = destination({ dest: 1, sync: true, minLength: LOG_BUFFER_BYTES });
  // flushSync, not flush(cb): the latter fsyncs afterwards (an error on a pipe). A flush that
  // fails (stdout gone) has nowhere to report to.
  const flush = (): void => {
    try {
      stream.flushSync();
    } catch {}
  };
  setInterval(flush, LOG_FLUSH_MS).unref();
  // pino registers an exit flush only for asynchronous destinations.
  process.on('exit', flush);
  return (stdout = stream);
}
