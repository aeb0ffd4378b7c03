/**
 * Liveness and readiness (SPEC §2, §6). Liveness says the process serves HTTP at all;
 * readiness says this replica should get traffic: config loaded (it is, or we would not be
 * running), the state store answers, and we are not draining for shutdown.
 */
import type { FastifyInstance } from 'fastify';
import type { StateStore } from '../state/store.js';

export interface Readiness {
  draining: boolean;
}

export function registerHealthRoutes(app: FastifyInstance, store: StateStore, readiness: Readiness): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (readiness.draining) return reply.code(503).send({ status: 'draining' });
    try {
      await withTimeout(store.ping(), 2_000);
    } catch (err) {
      // E.g. "Connection is closed. (redis sentinel, connection reconnecting)" during a failover.
      const where = store.describe?.();
      return reply.code(503).send({ status: 'unavailable', store: store.kind, reason: `${(err as Error).message}${where ? ` (${where})` : ''}` });
    }
    return { status: 'ready', store: store.kind };
  });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
