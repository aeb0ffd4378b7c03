/**
 * A real Sentinel-managed Redis for failover tests: one master, one replica
 * (`--replicaof`), and three sentinels (`redis-server <conf> --sentinel`, quorum 2), all on
 * free ports of 127.0.0.1. Sentinels decide fast (`down-after-milliseconds` 1000 by default)
 * so a killed master is replaced within seconds. Every wait is bounded; `stop()` ends every
 * process still running.
 */
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from './child.js';
import { freePort } from './free-port.js';
import { commandOnce, spawnRedisServer, stopAll, waitForInfo, type RedisProcess } from './redis-processes.js';

export interface RedisSentinelHandle {
  /** `host:port` of each sentinel, as `redis.sentinels` takes them. */
  sentinels: string[];
  /** The monitored master's name (`redis.name`). */
  name: string;
  master: RedisProcess;
  replica: RedisProcess;
  /** The port the sentinels currently name as the master's. */
  masterPort(): Promise<number>;
  /** Waits until the sentinels name `port` as the master and it answers as one. */
  waitForMaster(port: number, timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

const NAME = 'sbmaster';
/** Deadline for the sentinels to find the replica and each other. */
const DISCOVERY_MS = 20_000;

export async function startRedisSentinel(options: { downAfterMs?: number } = {}): Promise<RedisSentinelHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'sb-sentinel-'));
  const processes: RedisProcess[] = [];
  try {
    const master = await spawnRedisServer({ name: 'redis master', port: await freePort(), args: [] });
    processes.push(master);
    const replica = await spawnRedisServer({ name: 'redis replica', port: await freePort(), args: ['--replicaof', '127.0.0.1', String(master.port)] });
    processes.push(replica);
    await waitForInfo(replica.port, ['INFO', 'replication'], /master_link_status:up/, 'the replica to sync with the master');

    const ports = [await freePort(), await freePort(), await freePort()];
    for (const port of ports) {
      const file = join(dir, `sentinel-${port}.conf`);
      // The sentinel rewrites its own file (it records the replica, the other sentinels, the epoch).
      await writeFile(
        file,
        [
          `sentinel monitor ${NAME} 127.0.0.1 ${master.port} 2`,
          `sentinel down-after-milliseconds ${NAME} ${options.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${NAME} 5000`,
          `sentinel parallel-syncs ${NAME} 1`,
          '',
        ].join('\n'),
      );
      processes.push(await spawnRedisServer({ name: 'redis sentinel', port, configFile: file, args: ['--sentinel'] }));
    }
    for (const port of ports) {
      await waitUntil(
        async () => {
          const fields = (await commandOnce(port, 'SENTINEL', 'MASTER', NAME)) as string[];
          const at = (name: string) => fields[fields.indexOf(name) + 1];
          return at('num-slaves') === '1' && at('num-other-sentinels') === '2' ? true : undefined;
        },
        { what: `sentinel :${port} to see the replica and the other sentinels`, timeoutMs: DISCOVERY_MS, intervalMs: 200 },
      );
    }
    const sentinels = ports.map((port) => `127.0.0.1:${port}`);
    const masterPort = async () => {
      for (const port of ports) {
        try {
          const [, addressPort] = (await commandOnce(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', NAME)) as [string, string];
          return Number(addressPort);
        } catch {
          // ask the next one
        }
      }
      throw new Error('no sentinel answered');
    };
    return {
      sentinels,
      name: NAME,
      master,
      replica,
      masterPort,
      async waitForMaster(port, timeoutMs) {
        await waitUntil(async () => ((await masterPort()) === port ? true : undefined), { what: `the sentinels to name :${port} the master`, timeoutMs, intervalMs: 100 });
        await waitForInfo(port, ['ROLE'], /master/, `:${port} to be a master`, timeoutMs);
      },
      stop: () => stopAll(processes),
    };
  } catch (err) {
    await stopAll(processes);
    throw err;
  }
}
