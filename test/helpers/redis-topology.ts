/**
 * The Redis a multi-replica suite shares, picked by `SWITCHBOARD_TEST_REDIS_TOPOLOGY`:
 * `standalone` (default; test/helpers/redis.ts) or `cluster` (a real 3-master Redis Cluster,
 * test/helpers/redis-cluster.ts). A suite written once runs on both: the `*-cluster.test.ts`
 * variant sets the variable and imports the suite (issue 17).
 */
import { startRedis } from './redis.js';
import { startRedisCluster } from './redis-cluster.js';

export type RedisTopology = 'standalone' | 'cluster';

export interface TestRedis {
  topology: RedisTopology;
  /** The gateway's `redis` config block (without keyPrefix). */
  config: Record<string, unknown>;
  stop(): Promise<void>;
}

export function topologyFromEnv(): RedisTopology {
  const value = process.env.SWITCHBOARD_TEST_REDIS_TOPOLOGY ?? 'standalone';
  if (value !== 'standalone' && value !== 'cluster') throw new Error(`SWITCHBOARD_TEST_REDIS_TOPOLOGY must be standalone or cluster, not ${value}`);
  return value;
}

/** Starts the topology; `persistent` applies to standalone (a cluster's nodes keep data in memory). */
export async function startTestRedis(topology: RedisTopology = topologyFromEnv(), options: { persistent?: boolean } = {}): Promise<TestRedis> {
  if (topology === 'cluster') {
    const cluster = await startRedisCluster({ masters: 3 });
    return { topology, config: { mode: 'cluster', nodes: cluster.nodes.slice(0, 1) }, stop: () => cluster.stop() };
  }
  const redis = await startRedis(options);
  return { topology, config: { url: redis.url }, stop: () => redis.stop() };
}
