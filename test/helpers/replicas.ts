/**
 * Several Switchboard processes on one Redis, as several pods behind a load balancer
 * without session affinity (SPEC §5). Each replica is the real CLI with a real config file;
 * tests kill them with SIGKILL or SIGTERM like an orchestrator would.
 *
 * `roundRobinFetch` plays the load balancer for the SDK client: each request goes to the
 * next replica, and a replica that refuses connections is skipped (as a balancer's health
 * check would), so a killed replica's share moves to the others.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { GiveUp, spawnChild, waitUntil, type ChildExit, type ChildHandle } from './child.js';
import { freePort } from './free-port.js';
import { nodeEntry } from './node-entry.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface Replica {
  index: number;
  url: string;
  child: ChildHandle;
}

export interface ReplicaSet {
  replicas: Replica[];
  /** The audience every replica accepts (they share one public URL, like pods behind one host). */
  audience: string;
  /** `/mcp/{backend}` on replica `index`. */
  endpoint(index: number, backend: string): URL;
  /** Sends a signal and waits (bounded) for the process to exit. */
  kill(index: number, signal: NodeJS.Signals): Promise<ChildExit>;
  /** Starts replica `index` again on its port. */
  restart(index: number): Promise<void>;
  /** A fetch that spreads requests over live replicas, one after another. */
  roundRobinFetch(): typeof fetch;
  stop(): Promise<void>;
}

export interface ReplicaOptions {
  count: number;
  /** The Redis to share (standalone); or `redis`, a whole `redis` config block (cluster, sentinel, TLS). */
  redisUrl?: string;
  redis?: Record<string, unknown>;
  issuer: string;
  /** Backends as in the config file (`upstreamAuth` and the rest pass through). */
  backends: Array<{ name: string; url: string; timeout?: string } & Record<string, unknown>>;
  /** Extra `auth` keys (e.g. `login` for the browser pages). */
  auth?: Record<string, unknown>;
  /** Extra top-level config. */
  extra?: Record<string, unknown>;
  /**
   * Writes replica `index`'s config and returns the path to start it with (default: a plain
   * file in a temp dir); the reload test lays it out as a mounted ConfigMap.
   */
  writeConfig?: (index: number, config: Record<string, unknown>) => Promise<string>;
}

/** How many times the replicas are started on fresh ports when a port drawn was taken meanwhile. */
const PORT_ATTEMPTS = 3;

/**
 * Starts the replicas, on fresh ports again when one of them found its port taken
 * (`EADDRINUSE`): free-port.ts can only say a port was free when it looked, and another test file
 * running beside this one may bind it before the replica does (seen once in a clean-clone CI run).
 */
export async function startReplicas(options: ReplicaOptions): Promise<ReplicaSet> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startReplicasOnce(options);
    } catch (err) {
      if (attempt >= PORT_ATTEMPTS || !String((err as Error).message).includes('EADDRINUSE')) throw err;
    }
  }
}

async function startReplicasOnce(options: ReplicaOptions): Promise<ReplicaSet> {
  const ports = await Promise.all(Array.from({ length: options.count }, () => freePort()));
  const hosts = ports.map((p) => `127.0.0.1:${p}`);
  const publicUrl = `http://${hosts[0]}`;
  const audience = `${publicUrl}/mcp`;
  const dir = await mkdtemp(join(tmpdir(), 'sb-replicas-'));
  const files = await Promise.all(
    ports.map(async (port, index) => {
      const config = {
        publicUrl,
        listen: { host: '127.0.0.1', port },
        allowedHosts: hosts,
        redis: { ...(options.redis ?? { url: options.redisUrl }), keyPrefix: `sbrep-${ports[0]}:` },
        auth: { issuer: options.issuer, audience, algorithms: ['RS256', 'ES256'], ...options.auth },
        shutdown: { drainTimeout: '10s' },
        log: { level: process.env.SB_DEBUG_REPLICAS ? 'debug' : 'warn' },
        backends: options.backends,
        ...options.extra,
      };
      if (options.writeConfig) return options.writeConfig(index, config);
      const file = join(dir, `replica-${index}.yaml`);
      await writeFile(file, stringify(config));
      return file;
    }),
  );

  const start = async (index: number): Promise<ChildHandle> => {
    const child = await spawnChild({
      name: `switchboard replica ${index}`,
      command: process.execPath,
      args: [...nodeEntry(join(ROOT, 'src/cli.ts')), '--config', files[index]!],
      cwd: ROOT,
      env: { NODE_OPTIONS: '' },
    });
    const ready = `http://${hosts[index]}/readyz`;
    // What the last poll saw, for the failure message: a refused connection (not listening
    // yet), a 503 with its reason (the store), or the process gone.
    let lastSeen = 'no answer yet';
    await waitUntil(
      async () => {
        if (child.exit) throw new GiveUp(`replica ${index} exited before it was ready (code ${child.exit.code}, signal ${child.exit.signal}); its output:\n${child.logs()}`);
        const res = await fetch(ready, { signal: AbortSignal.timeout(5_000) }).catch((err: Error) => err);
        if (res instanceof Error) {
          lastSeen = `GET /readyz failed: ${(res.cause as Error | undefined)?.message ?? res.message}`;
          return undefined;
        }
        if (res.status === 200) return true;
        lastSeen = `GET /readyz answered ${res.status}: ${(await res.text().catch(() => '')).slice(0, 300)}`;
        return undefined;
      },
      {
        what: `replica ${index} to be ready`,
        timeoutMs: 30_000,
        intervalMs: 100,
        details: () => `last seen: ${lastSeen}\nthe replica's output (log level warn): ${child.logs() || '(none)'}`,
      },
    );
    return child;
  };
  const replicas: Replica[] = [];
  try {
    for (const [index, port] of ports.entries()) replicas.push({ index, url: `http://127.0.0.1:${port}`, child: await start(index) });
  } catch (err) {
    // The ones already up go: a new attempt draws every port again.
    await Promise.allSettled(replicas.map((r) => r.child.stop()));
    throw err;
  }

  const alive = new Set(replicas.map((r) => r.index));
  let next = 0;
  return {
    replicas,
    audience,
    endpoint: (index, backend) => new URL(`${replicas[index]!.url}/mcp/${backend}`),
    async kill(index, signal) {
      const child = replicas[index]!.child;
      alive.delete(index);
      child.process.kill(signal);
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([
        child.exited,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`replica ${index} did not exit within 30 s of ${signal}`)), 30_000))),
      ]).finally(() => clearTimeout(timer));
    },
    async restart(index) {
      replicas[index]!.child = await start(index);
      alive.add(index);
    },
    roundRobinFetch() {
      return async (input, init) => {
        const url = new URL(input instanceof Request ? input.url : input.toString());
        let lastError: unknown;
        for (let attempt = 0; attempt < replicas.length; attempt++) {
          const index = next++ % replicas.length;
          if (!alive.has(index)) continue;
          const target = new URL(url.pathname + url.search, replicas[index]!.url);
          try {
            return await fetch(target, init);
          } catch (err) {
            // Only a refused connection takes a replica out (as a balancer's health check
            // would); an aborted request is the client's own doing.
            if ((err as { cause?: { code?: string } }).cause?.code !== 'ECONNREFUSED') throw err;
            lastError = err;
            alive.delete(index);
          }
        }
        throw lastError ?? new Error('no replica is alive');
      };
    },
    async stop() {
      await Promise.allSettled(replicas.map((r) => r.child.stop()));
    },
  };
}

/** `switchboard_store_waits_total` by outcome (issue 45 §1), summed over the replicas' `/metrics`. */
export async function storeWaits(replicas: readonly Pick<Replica, 'url'>[]): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const replica of replicas) {
    const text = await (await fetch(`${replica.url}/metrics`)).text();
    for (const [, outcome, value] of text.matchAll(/^switchboard_store_waits_total\{outcome="(\w+)"\} (\S+)$/gm)) totals[outcome!] = (totals[outcome!] ?? 0) + Number(value);
  }
  return totals;
}
