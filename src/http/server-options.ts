/**
 * The Fastify instance's options: logging, body limit, request ids, the body read timeout
 * and the trusted proxies. Kept apart from the wiring in app.ts because each choice here is a hot-path or
 * robustness decision with its own reason.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyServerOptions } from 'fastify';
import type { Config } from '../config/schema.js';
import { pino } from 'pino';
import { AccessLog, type LineSink } from '../ops/access-log.js';
import { loggerOptions } from '../ops/logger.js';
import { bufferedStdout } from '../ops/log-buffer.js';
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
 * request writes a line of its own (ops/request-logger.ts), and stdout buffered (ops/log-buffer.ts).
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
