/**
 * The gateway on a real Redis in front of the paging fixture (test/fixtures/paging-backend.ts),
 * with a signing OAuth server and a Redis client to look at what the gateway stored: what the
 * per-user budget tests share (session-budget, session-eviction).
 */
import { Redis } from 'ioredis';
import type { ConfigInput } from '../../src/config/schema.js';
import { startPagingBackend, type PagingBackend } from '../fixtures/paging-backend.js';
import { startGateway, type GatewayHandle } from './gateway.js';
import { startOAuthServer, type OAuthHandle } from './oauth.js';
import { startRedis, type RedisHandle } from './redis.js';

export interface PagingGateway {
  oauth: OAuthHandle;
  redis: RedisHandle;
  backend: PagingBackend;
  /** Its one backend is named `paging`. */
  gateway: GatewayHandle;
  /** A client of the gateway's Redis. */
  client: Redis;
  stop(): Promise<void>;
}

export async function startPagingGateway(overrides: Partial<ConfigInput>): Promise<PagingGateway> {
  const [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startPagingBackend({ tools: 2, resources: 1, pageSize: 10 })]);
  const gateway = await startGateway({ issuer: oauth.issuer, redisUrl: redis.url, backends: [{ name: 'paging', url: backend.url }], overrides });
  const client = new Redis(redis.url);
  return {
    oauth,
    redis,
    backend,
    gateway,
    client,
    stop: async () => {
      client.disconnect();
      await gateway.close();
      await Promise.all([backend.stop(), redis.stop(), oauth.stop()]);
    },
  };
}
