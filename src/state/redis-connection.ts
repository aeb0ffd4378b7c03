/**
 * Makes the ioredis client for the `redis` config block (SPEC §8 "Redis", issue 17):
 * `standalone` (one `redis.url`, `rediss://` for TLS), `cluster` (ioredis `Cluster` from the
 * `redis.nodes` seeds) or `sentinel` (ioredis' sentinel connector: `redis.sentinels` and the
 * monitored master's `redis.name`), with `redis.tls` (CA, client certificate, server name)
 * and `redis.username` / `redis.password` (ACL). No client of our own: reconnects, MOVED /
 * ASK redirections, topology refreshes and sentinel failovers are ioredis'.
 *
 * No command waits inside ioredis: no offline queue, a command timeout, and a socket
 * timeout that replaces a connection the server stopped answering on (a master lost without
 * a TCP reset). A command written on a connection that then closes is failed at once and
 * never sent again by ioredis (`maxRetriesPerRequest: 0`, `autoResendUnfulfilledCommands:
 * false`): it may or may not have run, and only the operation knows whether running it twice
 * is harmless. Waiting for a reconnect or a failover, and sending again what is safe to
 * send again, is the store's (store-waits.ts, `redis.unavailableWait`); past that bound a
 * request gets 503 with Retry-After (SPEC §6), never a hang.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ConfigError } from '../config/errors.js';

export type RedisMode = 'standalone' | 'cluster' | 'sentinel';

/** `redis.tls`: each of ca, cert and key is a file path, or the PEM itself (e.g. from `${VAR}`). */
export interface RedisTlsSettings {
  ca?: string;
  cert?: string;
  key?: string;
  servername?: string;
}

/** Where Redis is: the connection part of the `redis` config block. */
export interface RedisEndpoint {
  /** Default `standalone`. */
  mode?: RedisMode;
  /** standalone: `redis://` or `rediss://` URL. */
  url?: string;
  /** cluster: seed URLs. */
  nodes?: string[];
  /** sentinel: `host:port` of the sentinels. */
  sentinels?: string[];
  /** sentinel: the monitored master's name. */
  name?: string;
  tls?: RedisTlsSettings;
  username?: string;
  password?: string;
}

export type RedisClient = Redis | Cluster;

/** A command not answered within this fails (→ 503), whatever the connection looks like. */
export const COMMAND_TIMEOUT_MS = 5_000;
/**
 * A socket with commands pending and nothing received for this long is replaced (its
 * commands have timed out by then): a master gone without a TCP reset would otherwise keep
 * the connection, and every command on it would wait for the command timeout, for minutes.
 */
const SOCKET_TIMEOUT_MS = COMMAND_TIMEOUT_MS;
const CONNECT_TIMEOUT_MS = 5_000;

/** Fail fast: what every command connection gets (tests may override). */
const FAIL_FAST: RedisOptions = {
  // A connection that closes fails the commands written on it at once (0: on the first close,
  // not after a reconnect attempt), and ioredis does not write them again after a reconnect:
  // an INCR or an append that did run would run twice (store-waits.ts decides per operation).
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  enableOfflineQueue: false,
  connectTimeout: CONNECT_TIMEOUT_MS,
  commandTimeout: COMMAND_TIMEOUT_MS,
  socketTimeout: SOCKET_TIMEOUT_MS,
  retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
};

/** The client for `endpoint`; `keyPrefix` applies to keys (not to classic pub/sub channels). */
export function connectRedis(endpoint: RedisEndpoint, keyPrefix: string, overrides: RedisOptions = {}): RedisClient {
  const mode = endpoint.mode ?? 'standalone';
  const tls = tlsOptions(endpoint.tls);
  const auth = { ...(endpoint.username ? { username: endpoint.username } : {}), ...(endpoint.password ? { password: endpoint.password } : {}) };
  if (mode === 'cluster') {
    const seeds = (endpoint.nodes ?? []).map((url, i) => parseRedisUrl(url, ['redis', 'nodes', i]));
    const secure = tls ?? (seeds.some((s) => s.secure) ? {} : undefined);
    const options: ClusterOptions = {
      keyPrefix,
      enableOfflineQueue: false,
      // A lost master's slots: retry briefly while the cluster promotes a replica, then fail.
      maxRedirections: 16,
      // Not on a closed connection: the commands written on it may have run, and only the
      // store knows which are safe to send again (store-waits.ts, which also refreshes the
      // slots then). Refusals (CLUSTERDOWN, TRYAGAIN, MOVED) ran nothing and are retried here.
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 100,
      slotsRefreshTimeout: 2_000,
      // ioredis' ready check (CLUSTER INFO) goes to a node whose connection may not be made yet;
      // without an offline queue it fails ("Connection is closed") and the whole cluster
      // client reconnects with a growing delay — measured 1.5–4.5 s per connect, past 10 s on
      // a busy machine. RedisStore.ready() pings every master instead, and a cluster that is
      // down answers CLUSTERDOWN, which is retried (retryDelayOnClusterDown).
      enableReadyCheck: false,
      clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
      redisOptions: { ...FAIL_FAST, ...seeds[0]?.auth, ...auth, ...(secure ? { tls: secure } : {}), ...overrides, keyPrefix: undefined },
    };
    const cluster = new Cluster(
      seeds.map((s) => ({ host: s.host, port: s.port })),
      options,
    );
    // ioredis connects to a node on its first command; without an offline queue, commands
    // arriving while that connection is still being made are refused and retried 100 ms
    // later through another node (MOVED). Connect each node as soon as the cluster knows it.
    cluster.on('+node', (node: Redis) => {
      if (node.status === 'wait') node.connect().catch(() => {});
    });
    return cluster;
  }
  if (mode === 'sentinel') {
    const sentinels = (endpoint.sentinels ?? []).map((hostPort, i) => {
      const { host, port } = parseRedisUrl(`redis://${hostPort}`, ['redis', 'sentinels', i]);
      return { host, port };
    });
    return new Redis({
      sentinels,
      name: endpoint.name,
      // A lost master closes the connection, and every reconnect asks the sentinels where the
      // master is. A master demoted while still up (a planned failover) answers writes with
      // READONLY: reconnect, which finds the new one. (ioredis' failoverDetector would also
      // drop a connection already made to the new master when +switch-master arrives late:
      // a second burst of errors after the failover.)
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
      ...(tls ? { tls, enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
      keyPrefix,
      ...FAIL_FAST,
      ...auth,
      ...overrides,
    });
  }
  const target = parseRedisUrl(endpoint.url ?? '', ['redis', 'url']);
  const secure = tls ?? (target.secure ? {} : undefined);
  return new Redis({ host: target.host, port: target.port, db: target.db, ...target.auth, ...auth, ...(secure ? { tls: secure } : {}), keyPrefix, ...FAIL_FAST, ...overrides });
}

/**
 * Resolves once `client` is connected (startup waits for it so the first request does not
 * fail). A cluster is ready when it knows its slots; its masters' connections are waited for
 * too, or the first requests would be refused while they are being made (see above).
 */
export async function whenConnected(client: RedisClient, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  if (client.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`Redis not reachable within ${timeoutMs} ms`));
      }, timeoutMs);
      const onReady = () => {
        cleanup();
        resolve();
      };
      const cleanup = () => {
        clearTimeout(timer);
        client.off('ready', onReady);
      };
      client.on('ready', onReady);
    });
  }
  if (!isCluster(client)) return;
  let timer: NodeJS.Timeout | undefined;
  const masters = Promise.allSettled(client.nodes('master').map((node) => node.ping()));
  await Promise.race([masters, new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]).finally(() => clearTimeout(timer));
}

/**
 * A connection for pub/sub (it cannot send other commands once subscribed), with no key
 * prefix (channels carry theirs) and an offline queue, so subscriptions wait for a
 * reconnect instead of failing; ioredis subscribes again by itself after one. A cluster's
 * also takes SSUBSCRIBE to the node owning each channel's slot (sharded pub/sub, Redis 7).
 * A (un)subscribe in flight when the connection closes is sent again after the reconnect:
 * subscribing twice is subscribing once.
 *
 * A standalone or sentinel subscriber does not subscribe again by itself after a reconnect
 * (`autoResubscribe: false`): ioredis would send that SUBSCRIBE without handling its
 * rejection, so closing the connection while it is unanswered (a replica shutting down just
 * after Redis came back) raised an unhandled rejection, which ends a Node process. Its user
 * subscribes again on each later `ready` and handles the outcome (redis-coordinator.ts). A
 * cluster's subscribers handle theirs (ioredis ClusterSubscriber).
 */
export function subscriberFor(client: RedisClient): RedisClient {
  if (client instanceof Cluster) {
    const redisOptions = { ...client.options.redisOptions, commandTimeout: undefined, socketTimeout: undefined, autoResendUnfulfilledCommands: true };
    return client.duplicate(undefined, { keyPrefix: '', shardedSubscribers: true, enableOfflineQueue: true, redisOptions });
  }
  return client.duplicate({ keyPrefix: '', enableOfflineQueue: true, maxRetriesPerRequest: null, autoResendUnfulfilledCommands: true, autoResubscribe: false, commandTimeout: undefined, socketTimeout: undefined });
}

export const isCluster = (client: RedisClient): client is Cluster => client instanceof Cluster;

interface ParsedUrl {
  host: string;
  port: number;
  db?: number;
  secure: boolean;
  auth: { username?: string; password?: string };
}

/** `redis[s]://[user:password@]host[:port][/db]`; errors name the config key. */
function parseRedisUrl(text: string, key: Array<string | number>): ParsedUrl {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(key, 'is not a redis:// or rediss:// URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') throw new ConfigError(key, 'must be a redis:// or rediss:// URL');
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : undefined;
  const auth = {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
  };
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port ? Number(url.port) : 6379, ...(Number.isInteger(db) ? { db } : {}), secure: url.protocol === 'rediss:', auth };
}

/** `redis.tls` as Node's TLS options; undefined when absent. PEM files are read once, here. */
function tlsOptions(settings: RedisTlsSettings | undefined): ConnectionOptions | undefined {
  if (!settings) return undefined;
  const pem = (field: 'ca' | 'cert' | 'key') => {
    const value = settings[field];
    if (value === undefined) return {};
    if (value.includes('-----BEGIN')) return { [field]: value };
    try {
      return { [field]: readFileSync(value, 'utf8') };
    } catch (err) {
      throw new ConfigError(['redis', 'tls', field], `cannot read ${value}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };
  return { ...pem('ca'), ...pem('cert'), ...pem('key'), ...(settings.servername ? { servername: settings.servername } : {}) };
}

/**
 * Connection errors surface through the commands that fail, so the client's `error` events
 * are only silenced here. ioredis listens for a socket's first `error` only (`once`); a TLS
 * socket can raise a second one, an alert arriving while it is being closed, and with no
 * listener left Node turns it into an uncaught exception that ends the process. So every
 * socket that erred, and the one being closed, keeps a listener until it is gone.
 */
export function silenceConnectionErrors(client: RedisClient): void {
  client.on('error', () => keepSocketQuiet(client));
}

/** Before `disconnect()`: the socket being closed may still report an alert from the peer. */
export function keepSocketQuiet(client: RedisClient): void {
  const stream = (client as { stream?: NodeJS.EventEmitter }).stream;
  if (stream && !QUIETED.has(stream)) {
    QUIETED.add(stream);
    stream.on('error', () => {});
  }
}

const QUIETED = new WeakSet<NodeJS.EventEmitter>();
