/**
 * The Fastify instance's options: logging, body limit, request ids and the body read
 * timeout. Kept apart from the wiring in app.ts because each choice here is a hot-path or
 * robustness decision with its own reason.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyServerOptions } from 'fastify';
import type { Config } from '../config/schema.js';
import { loggerOptions } from '../ops/logger.js';
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
    // With logging off, no logger at all: Fastify would otherwise still make a child logger
    // for every request (measurable on the hot path, see bench/README.md).
    logger: config.log.level === 'silent' ? false : logStream ? { ...loggerOptions(config.log.level), stream: logStream } : loggerOptions(config.log.level),
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
  };
}
