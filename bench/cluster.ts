/**
 * The Redis Cluster column of `npm run bench` (issue 17): a second gateway process with
 * `redis.mode: cluster` on a real 3-master cluster (test/helpers/redis-cluster.ts), the same
 * backends and the same user. The same tools/call load goes to the standalone gateway and to
 * the cluster one in alternating rounds, and each gateway's CPU per call is read from
 * /proc. Target: the cluster gateway within 10 % of the standalone one — what a cluster
 * adds on the gateway's side is routing by slot (CRC16 of the key) and the append batcher's
 * grouping by slot; the Redis work itself runs in the nodes.
 */
import type { OAuthHandle } from '../test/helpers/oauth.js';
import { startRedisCluster, type RedisClusterHandle } from '../test/helpers/redis-cluster.js';
import { baseHeaders, closedLoop, median, openPath, type Path } from './load.js';
import { startGateway, type Backend, type Gateway } from './processes.js';
import { processCpuUs } from './system.js';

export interface ClusterGateway {
  gateway: Gateway;
  cluster: RedisClusterHandle;
  /** A path like the standalone gateway's, on the cluster gateway (its own session and token). */
  path(gatewayPath: string): Promise<Path>;
  stop(): Promise<void>;
}

export async function startClusterGateway(oauth: OAuthHandle, backends: Backend[]): Promise<ClusterGateway> {
  const cluster = await startRedisCluster({ masters: 3 });
  const gateway = await startGateway({ redis: { mode: 'cluster', nodes: cluster.nodes }, issuer: oauth.issuer, backends }).catch(async (err: unknown) => {
    await cluster.stop();
    throw err;
  });
  const pools: Array<Path['pool']> = [];
  return {
    gateway,
    cluster,
    async path(gatewayPath) {
      const headers = baseHeaders(await oauth.token({ sub: 'bench-user', aud: gateway.audience }));
      const p = await openPath(`cluster ${gatewayPath}`, gateway.url, gatewayPath, headers);
      pools.push(p.pool);
      return p;
    },
    async stop() {
      await Promise.allSettled(pools.map((p) => p.close()));
      await gateway.child.stop().catch(() => {});
      await cluster.stop();
    },
  };
}

export interface ClusterCpuResult {
  standaloneCpuUsPerCall: number;
  clusterCpuUsPerCall: number;
  /** cluster ÷ standalone, median of the rounds' ratios. */
  ratio: number;
  ratioRounds: number[];
  errors: number;
}

/** Alternating closed-loop rounds on the two gateways; CPU per call of each gateway process. */
export async function measureClusterCpu(
  paths: { standalone: Path; cluster: Path },
  pids: { standalone: number; cluster: number },
  settings: { rounds: number; durationMs: number; warmupMs: number; connections: number },
): Promise<ClusterCpuResult> {
  for (const which of ['standalone', 'cluster'] as const) await closedLoop(paths[which], settings.connections, { durationMs: settings.warmupMs });
  const perCall = { standalone: [] as number[], cluster: [] as number[] };
  const ratios: number[] = [];
  let errors = 0;
  for (let r = 0; r < settings.rounds; r++) {
    const order = r % 2 === 0 ? (['standalone', 'cluster'] as const) : (['cluster', 'standalone'] as const);
    for (const which of order) {
      const before = processCpuUs(pids[which]);
      const res = await closedLoop(paths[which], settings.connections, { durationMs: settings.durationMs });
      perCall[which].push((processCpuUs(pids[which]) - before) / Math.max(1, res.calls));
      errors += res.errors;
    }
    ratios.push(perCall.cluster.at(-1)! / perCall.standalone.at(-1)!);
  }
  return {
    standaloneCpuUsPerCall: median(perCall.standalone),
    clusterCpuUsPerCall: median(perCall.cluster),
    ratio: median(ratios),
    ratioRounds: ratios.map((x) => Math.round(x * 1000) / 1000),
    errors,
  };
}
