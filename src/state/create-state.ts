/**
 * The gateway's state, built and released in one place (SPEC §5, issue 14): the store, the
 * coordination between replicas and the rate limiter's counters.
 *
 * With `redis` configured they all live in that Redis, on ONE command connection — the
 * store's (standalone, cluster or sentinel, with TLS: redis-connection.ts): the coordinator
 * leases and posts on it (its pub/sub subscriber is a duplicate of it, as pub/sub needs a
 * connection of its own), and the rate limiter syncs its counts on it in the background
 * (batched-rate-limit-store.ts), so that replicas share one budget per user. Without
 * `redis`, everything is in process and only one replica may run.
 *
 * A Redis blip is waited out, up to `redis.unavailableWait`, by the store and the
 * coordinator alike (one {@link StoreWaits} on the one connection: one bound, one cap;
 * store-waits.ts); the counter never waits (it counts locally meanwhile).
 *
 * {@link State.close} releases them in the order they depend on each other: the counter
 * first (it sends its pending counts while the connection is still up), then the
 * coordinator (its subscriber), then the store (the connection itself).
 */
import type { Config } from '../config/schema.js';
import type { Coordinator } from './coordinator.js';
import { BatchedRateLimitStore } from './batched-rate-limit-store.js';
import { MemoryCoordinator } from './memory-coordinator.js';
import { MemoryStore } from './memory-store.js';
import { LocalRateLimitStore, type RateLimitStore } from './rate-limit-store.js';
import { RedisCoordinator } from './redis-coordinator.js';
import { RATE_LIMIT_NAMESPACE } from './redis-keys.js';
import { RedisStore } from './redis-store.js';
import type { StoreWaitListener, StoreWaits } from './store-waits.js';
import type { StateStore } from './store.js';

export interface State {
  readonly store: StateStore;
  readonly coordinator: Coordinator;
  /** The per-user request counts of the rate limiter (http/rate-limit.ts). */
  readonly rateCounter: RateLimitStore;
  /** Told of every operation that waited for Redis to come back, and how it ended (metrics); never called without Redis. */
  onStoreWait(listener: StoreWaitListener): void;
  /** Releases everything above, in order; the store only when it was built here. */
  close(): Promise<void>;
}

export interface StateOptions {
  /**
   * A store to use instead of the one the config names (tests). Coordination and counters
   * follow it (on its connection if it is a Redis store); {@link State.close} leaves it open:
   * whoever made it closes it.
   */
  store?: StateStore;
}

/** Where state says what it could not do better (no Redis: one replica only). */
export interface StateLog {
  warn(message: string): void;
}

export async function createState(config: Config, log: StateLog, options: StateOptions = {}): Promise<State> {
  const store = options.store ?? (await createStore(config, log));
  // Coordination and counters follow the store: Redis-backed replicas share that same Redis.
  const redis = store instanceof RedisStore ? store : undefined;
  const waits: StoreWaits | undefined = redis?.waits;
  const coordinator: Coordinator = redis ? new RedisCoordinator(redis.redis, config.redis?.keyPrefix ?? redis.keyPrefix, waits) : new MemoryCoordinator();
  const rateCounter: RateLimitStore = redis ? new BatchedRateLimitStore({ redis: redis.redis, namespace: RATE_LIMIT_NAMESPACE }) : new LocalRateLimitStore();
  return {
    store,
    coordinator,
    rateCounter,
    onStoreWait: (listener) => waits?.observe(listener),
    async close() {
      await rateCounter.close();
      await coordinator.close();
      if (!options.store) await store.close();
    },
  };
}

/** `streams.replayBytes` and `streams.replayBytesPerUser` for the store's replay logs. */
const replayBudget = (config: Config) => ({ maxBytes: config.streams.replayBytes, maxBytesPerUser: config.streams.replayBytesPerUser });

async function createStore(config: Config, log: StateLog): Promise<StateStore> {
  if (!config.redis) {
    log.warn('no redis configured: state is in memory, so run one replica only');
    return new MemoryStore(undefined, replayBudget(config));
  }
  // Standalone, cluster or sentinel, with TLS: redis-connection.ts.
  const store = new RedisStore({ ...config.redis, replayBudget: replayBudget(config), unavailableWaitMs: config.redis.unavailableWait });
  await store.ready();
  return store;
}
