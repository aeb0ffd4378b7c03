/**
 * A real Redis Cluster for integration tests: `masters` (default 3) `redis-server
 * --cluster-enabled yes` processes, and optionally a replica per master, joined with
 * `redis-cli --cluster create --cluster-yes`, on free ports of 127.0.0.1. Each node gets
 * its cluster-bus port explicitly (`--cluster-port`, Redis 7), so nothing assumes
 * port + 10000 is free. Every wait is bounded; `stop()` ends every process.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import { redisCli, spawnRedisServer, stopAll, waitForInfo, type RedisProcess } from './redis-processes.js';

export interface RedisClusterHandle {
  /** Seed URLs (`redis://127.0.0.1:<port>`) of every node, masters first. */
  nodes: string[];
  processes: RedisProcess[];
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  /** Replicas per master (default 0). */
  replicas?: number;
  /** `cluster-node-timeout` in ms (default 2000): how soon a lost master is failed over. */
  nodeTimeoutMs?: number;
}

/** Deadline for the whole cluster to report `cluster_state:ok` on every node. */
const CLUSTER_READY_MS = 30_000;

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  const count = masters * (1 + (options.replicas ?? 0));
  const dir = await mkdtemp(join(tmpdir(), 'sb-cluster-'));
  const processes: RedisProcess[] = [];
  try {
    const ports: Array<[number, number]> = [];
    for (let i = 0; i < count; i++) ports.push([await freePort(), await freePort()]);
    processes.push(
      ...(await Promise.all(
        ports.map(([port, bus]) =>
          spawnRedisServer({
            name: 'redis cluster node',
            port,
            args: [
              ...['--cluster-enabled', 'yes', '--cluster-port', String(bus)],
              ...['--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 2_000)],
            ],
          }),
        ),
      )),
    );
    const addresses = processes.map((p) => `127.0.0.1:${p.port}`);
    await redisCli(['--cluster', 'create', ...addresses, '--cluster-replicas', String(options.replicas ?? 0), '--cluster-yes']);
    for (const p of processes) {
      await waitForInfo(p.port, ['CLUSTER', 'INFO'], new RegExp(`cluster_state:ok[\\s\\S]*cluster_known_nodes:${count}\\b`), `cluster_state:ok on node ${p.port}`, CLUSTER_READY_MS);
      // A replica that never synced would not be promoted (its data counts as too old).
      await waitForInfo(p.port, ['INFO', 'replication'], /role:master|master_link_status:up/, `node ${p.port} to be a master or an in-sync replica`, CLUSTER_READY_MS);
    }
  } catch (err) {
    await stopAll(processes);
    throw err;
  }
  return {
    nodes: processes.map((p) => `redis://127.0.0.1:${p.port}`),
    processes,
    stop: () => stopAll(processes),
  };
}
