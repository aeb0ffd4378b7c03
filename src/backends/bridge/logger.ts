/**
 * What the bridge logs through: the gateway's own pino logger (SPEC §6, structured logs),
 * narrowed so the bridge can be exercised without a Fastify instance.
 */
import type { FastifyBaseLogger } from 'fastify';

export type BridgeLogger = Pick<FastifyBaseLogger, 'debug' | 'info' | 'warn' | 'error'>;
