/**
 * Starts a real, throw-away Redis for integration tests.
 *
 * Why real: the gateway's Redis code paths (reconnects, pub/sub, outages) are
 * exactly what mocks get wrong, and tests must be able to take Redis away and
 * bring it back (`pause`/`resume`, `restart`).
 *
 * Where it comes from, in order:
 *  1. a `redis:7-alpine` container via testcontainers, but ONLY when a
 *     container engine actually answers (checked with a short deadline);
 *  2. otherwise the `redis-server` binary on PATH
 *     (`apt-get install -y redis-server`), bound to 127.0.0.1.
 * Set `SWITCHBOARD_TEST_REDIS=binary` or `=docker` to force one of them.
 *
 * Data is never persisted (`--save "" --appendonly no`): a restarted or
 * resumed server is empty, like a Redis that lost its memory.
 */
import { accessSync, constants as fsConstants, existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Redis } from 'ioredis';
import type { StartedTestContainer } from 'testcontainers';
import { GiveUp, settlesWithin, spawnChild, waitUntil, type ChildHandle } from './child.js';
import { freePort } from './free-port.js';

/** A running (or paused) test Redis. `url` and `port` never change for the handle's life. */
export interface RedisHandle {
  /** `redis://host:port`, e.g. `redis://127.0.0.1:40123`. */
  url: string;
  port: number;
  /** Stops the server for good. Idempotent. */
  stop(): Promise<void>;
  /** Stop, then start again on the same port; data survives only with `persistent`. */
  restart(): Promise<void>;
  /** Stop the server but keep the port, so `resume()` brings it back (empty unless `persistent`). Simulates an outage. */
  pause(): Promise<void>;
  /** Start the server again on the remembered port after `pause()`. No-op if it is running. */
  resume(): Promise<void>;
}

/** Deadline for a Redis server (binary) to answer PING. */
const BINARY_READY_MS = 15_000;
/** Deadline for a container to start (may include an image pull). */
const CONTAINER_READY_MS = 120_000;
/** Deadline for "is a container engine reachable?". */
const DOCKER_PROBE_MS = 5_000;
const IMAGE = 'redis:7-alpine';

/** One running server process/container. */
interface Instance {
  host: string;
  port: number;
  stop(): Promise<void>;
}

/** A way of running Redis: launch on a given port, or on a port of its choosing when undefined. */
type Launcher = (port: number | undefined, dataDir: string | undefined) => Promise<Instance>;

export interface RedisOptions {
  /**
   * Keep data across restart()/pause()+resume(), as a production Redis with an append-only
   * file does (fsync on every write, in a temporary directory owned by this handle).
   */
  persistent?: boolean;
}

/** Starts a Redis (container when a engine answers, else the binary) and waits until it answers PING. */
export async function startRedis(options: RedisOptions = {}): Promise<RedisHandle> {
  const launch = (await useDocker()) ? launchContainer : launchBinary;
  const dataDir = options.persistent ? await mkdtemp(join(tmpdir(), 'sb-redis-')) : undefined;
  let current: Instance | undefined = await launch(undefined, dataDir);
  const { host, port } = current;
  let stopped = false;

  const halt = async () => {
    const instance = current;
    current = undefined;
    await instance?.stop();
  };
  const bringUp = async () => {
    if (stopped) throw new Error(`Redis on port ${port} was stopped; it cannot be resumed`);
    if (current) return;
    current = await launch(port, dataDir);
  };

  return {
    url: `redis://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    async stop() {
      stopped = true;
      await halt();
    },
    async restart() {
      await halt();
      await bringUp();
    },
    pause: halt,
    resume: bringUp,
  };
}

// ---------------------------------------------------------------- binary ---

/** Runs `redis-server` on 127.0.0.1 and waits for PING. */
const launchBinary: Launcher = async (requestedPort, dataDir) => {
  const binary = findOnPath('redis-server');
  if (!binary) {
    throw new Error(
      'redis-server is not installed and no container engine is reachable.\n' +
        'Install it with: apt-get update && apt-get install -y redis-server',
    );
  }
  const port = requestedPort ?? (await freePort());
  const child = await spawnChild({
    name: `redis-server :${port}`,
    command: binary,
    // `--save ''` disables RDB snapshots; `--dir` keeps any stray file out of the repo.
    args: [
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', ''],
      ...(dataDir ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dataDir] : ['--appendonly', 'no', '--dir', tmpdir()]),
    ],
    stopGraceMs: 5_000,
  });
  try {
    await waitForPing('127.0.0.1', port, BINARY_READY_MS, child);
  } catch (err) {
    await child.stop().catch(() => undefined);
    throw err;
  }
  return { host: '127.0.0.1', port, stop: () => child.stop() };
};

/** Like `which`: the absolute path of an executable on PATH, or undefined. */
export function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

// ------------------------------------------------------------- container ---

let dockerDecision: Promise<boolean> | undefined;

/** Decides once per process whether to use containers. */
function useDocker(): Promise<boolean> {
  dockerDecision ??= (async () => {
    const forced = process.env.SWITCHBOARD_TEST_REDIS;
    if (forced === 'binary') return false;
    if (forced === 'docker') return true;
    return dockerReachable();
  })();
  return dockerDecision;
}

/**
 * True only if testcontainers finds a container engine that answers within
 * {@link DOCKER_PROBE_MS}. Importing testcontainers costs about a second, so
 * it is skipped entirely when nothing even hints at an engine.
 */
async function dockerReachable(): Promise<boolean> {
  if (!dockerHinted()) return false;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const probe = getContainerRuntimeClient().then(
      () => true,
      () => false,
    );
    const answered = await settlesWithin(probe, DOCKER_PROBE_MS);
    return answered && (await probe);
  } catch {
    return false;
  }
}

/** Cheap, synchronous hints that a container engine may exist (the places testcontainers looks). */
function dockerHinted(): boolean {
  if (process.platform === 'win32') return true;
  if (process.env.DOCKER_HOST || process.env.TESTCONTAINERS_HOST_OVERRIDE) return true;
  const home = homedir();
  const candidates = [
    '/var/run/docker.sock',
    join(home, '.testcontainers.properties'),
    join(home, '.docker', 'run', 'docker.sock'),
    join(home, '.docker', 'desktop', 'docker.sock'),
    process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, 'docker.sock') : '',
    typeof process.getuid === 'function' ? `/run/user/${process.getuid()}/docker.sock` : '',
  ];
  return candidates.some((p) => p !== '' && existsSync(p));
}

/**
 * Runs `redis:7-alpine`. The first launch lets the engine pick the host port;
 * later launches (restart/resume) publish the SAME host port, so clients keep
 * their URL. pause() removes the container and resume() starts a fresh one
 * (rather than `docker pause`, which would freeze a server that still accepts
 * TCP connections: a different failure than "Redis is down").
 *
 * Limitations: the port is published on 127.0.0.1 only when the engine is
 * local (a remote engine's loopback would be unreachable); a fixed host port
 * could in theory be taken by someone else while the container is down.
 * Containers left behind by a crashed test run are removed by testcontainers'
 * reaper (Ryuk).
 */
const launchContainer: Launcher = async (requestedPort, dataDir) => {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  const client = await getContainerRuntimeClient();
  const engineHost = client.info.containerRuntime.host;
  const localEngine = ['localhost', '127.0.0.1', '::1'].includes(engineHost);

  class RedisContainer extends GenericContainer {
    /** Publish every exposed port on 127.0.0.1 only. */
    loopbackOnly(): this {
      const bindings = this.hostConfig.PortBindings as Record<string, { HostIp?: string; HostPort?: string }[]> | undefined;
      for (const key of Object.keys(bindings ?? {})) {
        bindings![key] = bindings![key]!.map((binding) => ({ ...binding, HostIp: '127.0.0.1' }));
      }
      return this;
    }
  }

  let container = new RedisContainer(IMAGE)
    .withCommand(['redis-server', '--save', '', ...(dataDir ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'])])
    .withBindMounts(dataDir ? [{ source: dataDir, target: '/data' }] : [])
    .withExposedPorts(requestedPort === undefined ? 6379 : { container: 6379, host: requestedPort })
    .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
    .withStartupTimeout(CONTAINER_READY_MS);
  if (localEngine) container = container.loopbackOnly();

  const started: StartedTestContainer = await container.start();
  const host = localEngine ? '127.0.0.1' : started.getHost();
  const port = started.getMappedPort(6379);
  try {
    await waitForPing(host, port, BINARY_READY_MS);
  } catch (err) {
    await started.stop({ timeout: 0 }).catch(() => undefined);
    throw err;
  }
  return {
    host,
    port,
    stop: async () => {
      await started.stop({ timeout: 0 });
    },
  };
};

// ------------------------------------------------------------------ ping ---

/**
 * Polls PING until Redis answers PONG or the deadline passes. Each attempt
 * uses a fresh, non-retrying ioredis client so a failed attempt leaves no
 * reconnect loop behind. Gives up at once if the server process died.
 */
export async function waitForPing(host: string, port: number, timeoutMs: number, child?: ChildHandle): Promise<void> {
  await waitUntil(
    async () => {
      if (child?.exit) {
        throw new GiveUp(
          `${child.name} exited (code ${child.exit.code}, signal ${child.exit.signal}) before answering PING\n${child.logs()}`,
        );
      }
      return (await pingOnce(host, port)) ? true : undefined;
    },
    {
      what: `Redis PING on ${host}:${port}`,
      timeoutMs,
      details: () => (child ? child.logs() : ''),
    },
  );
}

/** One PING with a fresh connection; true on PONG. */
async function pingOnce(host: string, port: number): Promise<boolean> {
  const redis = new Redis({
    host,
    port,
    lazyConnect: true,
    connectTimeout: 1_000,
    commandTimeout: 1_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // Connection errors are reported through connect()/ping(); don't let the
  // 'error' event become an unhandled one.
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } finally {
    redis.disconnect();
  }
}
