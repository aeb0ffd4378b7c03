/**
 * Plain `redis-server` processes for the topology helpers (redis-cluster.ts,
 * redis-sentinel.ts, redis-tls.ts): one process on a port we chose, bound to 127.0.0.1,
 * nothing persisted, started with a deadline and stopped like every other test child
 * (child.ts). Debian's `redis-server` package brings `redis-cli` and the sentinel
 * (`redis-server --sentinel`); there is no Docker variant of these topologies.
 */
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { Redis, type RedisOptions } from 'ioredis';
import { spawnChild, waitUntil, type ChildHandle } from './child.js';
import { findOnPath, waitForPing } from './redis.js';

const run = promisify(execFile);

/** Deadline for a server to answer PING. */
export const SERVER_READY_MS = 15_000;

export interface RedisProcess {
  port: number;
  child: ChildHandle;
  /** SIGTERM (SIGKILL after a grace period); resolves once it is gone. */
  stop(): Promise<void>;
  /** SIGKILL at once, as a crashed node or a lost machine; resolves once it is gone. */
  kill(): Promise<void>;
}

function binary(name: string): string {
  const path = findOnPath(name);
  if (!path) throw new Error(`${name} is not installed (apt-get install -y redis-server brings redis-server and redis-cli)`);
  return path;
}

/**
 * Starts `redis-server` on `port` with the given directives (each `--name value …`) and
 * waits for PING, unless `ping` is false (TLS-only servers are probed by their caller).
 * A config file, when given, comes first (the sentinel needs one it can rewrite).
 */
export async function spawnRedisServer(options: { name: string; port: number; args: string[]; configFile?: string; ping?: boolean }): Promise<RedisProcess> {
  const child = await spawnChild({
    name: `${options.name} :${options.port}`,
    command: binary('redis-server'),
    args: [...(options.configFile ? [options.configFile] : []), '--port', String(options.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir(), ...options.args],
    stopGraceMs: 3_000,
  });
  if (options.ping !== false) {
    try {
      await waitForPing('127.0.0.1', options.port, SERVER_READY_MS, child);
    } catch (err) {
      await child.stop().catch(() => undefined);
      throw err;
    }
  }
  return {
    port: options.port,
    child,
    stop: () => child.stop(),
    async kill() {
      if (!child.exit) child.process.kill('SIGKILL');
      // The child is unref'd: keep the event loop alive until it is reaped.
      const alive = setInterval(() => {}, 1_000);
      await child.exited.finally(() => clearInterval(alive));
    },
  };
}

/** Runs `redis-cli` with a deadline; resolves with its standard output. */
export async function redisCli(args: string[], timeoutMs = 30_000): Promise<string> {
  const { stdout } = await run(binary('redis-cli'), args, { timeout: timeoutMs, maxBuffer: 1024 * 1024 });
  return stdout;
}

/**
 * One command on a fresh, non-retrying connection to 127.0.0.1 (for probes that must not
 * linger); `target` is the port, or connection options (TLS, credentials) with it.
 */
export async function commandOnce(target: number | (RedisOptions & { port: number }), command: string, ...args: string[]): Promise<unknown> {
  const options = typeof target === 'number' ? { port: target } : target;
  const redis = new Redis({ host: '127.0.0.1', ...options, lazyConnect: true, connectTimeout: 1_000, commandTimeout: 2_000, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await redis.call(command, ...args);
  } finally {
    redis.disconnect();
  }
}

/** Polls an INFO-like text reply until `pattern` matches, within `timeoutMs`. */
export async function waitForInfo(port: number, command: string[], pattern: RegExp, what: string, timeoutMs = SERVER_READY_MS): Promise<void> {
  await waitUntil(async () => (pattern.test(String(await commandOnce(port, command[0]!, ...command.slice(1)))) ? true : undefined), {
    what,
    timeoutMs,
    intervalMs: 100,
  });
}

/** Stops every process, whatever fails. */
export async function stopAll(processes: readonly RedisProcess[]): Promise<void> {
  await Promise.all(processes.map((p) => p.stop().catch(() => undefined)));
}
