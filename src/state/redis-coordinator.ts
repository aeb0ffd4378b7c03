/**
 * Coordination between replicas over Redis. Leases are keys with a PX expiry, changed only
 * by compare-and-set Lua scripts so that a replica never renews or releases a lease that
 * another one took over. Messages travel over pub/sub: each replica listens on its own
 * channel, and every append to a replay log is published on that stream's channel (see
 * RedisStore.appendEvents) for a replica that follows a stream read elsewhere.
 *
 * Keys (redis-keys.ts): `g:<user>:<session>` standalone holder ("<replica> <stream>"),
 * `h:<user>:<session>:<stream>` replica reading a detached stream, `m:<user>:<session>` mailbox;
 * channels `replica:<id>` (one replica's inbox) and `replicas` (broadcast).
 *
 * In a Redis Cluster (issue 17) the stream channels use sharded pub/sub: the append script
 * SPUBLISHes on the shard that owns the user's slot, and a follower SSUBSCRIBEs there
 * (ioredis keeps one subscriber per master and moves subscriptions when slots move), so the
 * busiest traffic, every relayed event, never crosses the whole cluster bus. The replica
 * inboxes and the broadcast channel stay classic pub/sub: few messages, and a broadcast has
 * to reach every replica wherever it is connected.
 *
 * Lease and mailbox TTLs go through ttl.ts's wholeMs (whole ms, rounded up; nonsense refused).
 */
import { randomUUID } from 'node:crypto';
import type { Coordinator, ReplicaMessage, StandaloneClaim, StreamHolder } from './coordinator.js';
import { isCluster, keepSocketQuiet, silenceConnectionErrors, subscriberFor, type RedisClient } from './redis-connection.js';
import { RedisKeys } from './redis-keys.js';
import { CLAIM_STANDALONE, RELEASE_IF_HELD, RENEW_IF_HELD } from './redis-scripts.js';
import { wholeMs } from './ttl.js';
import type { StoredEvent, StreamKey } from './store.js';

type CoordinatorRedis = RedisClient & {
  sbClaim(holderKey: string, mailboxKey: string, value: string, ttlMs: number, force: '0' | '1'): Promise<[number, string, ...string[]]>;
  sbRenew(key: string, value: string, ttlMs: number): Promise<number>;
  sbRelease(key: string, value: string): Promise<number>;
};

export class RedisCoordinator implements Coordinator {
  readonly replicaId = randomUUID();
  readonly #redis: CoordinatorRedis;
  readonly #subscriber: RedisClient;
  readonly #keys: RedisKeys;
  /** Stream channels: sharded in a cluster (SSUBSCRIBE), classic otherwise. */
  readonly #sharded: boolean;
  readonly #prefix: string;
  readonly #handlers: Array<(message: ReplicaMessage) => void> = [];
  readonly #watchers = new Map<string, Set<(events: StoredEvent[]) => void>>();
  readonly #inbox: string;
  readonly #everyone: string;

  /** @param redis the store's command connection (its keyPrefix applies to keys, not channels). */
  constructor(redis: RedisClient, keyPrefix: string) {
    this.#redis = redis as CoordinatorRedis;
    this.#prefix = keyPrefix;
    this.#sharded = isCluster(redis);
    this.#keys = new RedisKeys(this.#sharded);
    this.#redis.defineCommand('sbClaim', { numberOfKeys: 2, lua: CLAIM_STANDALONE });
    this.#redis.defineCommand('sbRenew', { numberOfKeys: 1, lua: RENEW_IF_HELD });
    this.#redis.defineCommand('sbRelease', { numberOfKeys: 1, lua: RELEASE_IF_HELD });
    // Pub/sub needs a connection of its own; it resubscribes by itself after a reconnect.
    this.#subscriber = subscriberFor(redis);
    silenceConnectionErrors(this.#subscriber);
    this.#inbox = this.#keys.replicaChannel(keyPrefix, this.replicaId);
    this.#everyone = this.#keys.broadcastChannel(keyPrefix);
    this.#subscriber.on('message', (channel: string, text: string) => this.#dispatch(channel, text));
    this.#subscriber.on('smessage', (channel: string, text: string) => this.#dispatch(channel, text));
    void this.#subscriber.subscribe(this.#inbox, this.#everyone).catch(() => {});
  }

  async claimStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number, force: boolean): Promise<StandaloneClaim> {
    const [granted, previous, ...mailbox] = await this.#redis.sbClaim(this.#keys.standalone(userKey, sessionId), this.#keys.mailbox(userKey, sessionId), `${this.replicaId} ${streamId}`, wholeMs(ttlMs, 'claimStandalone'), force ? '1' : '0');
    return { granted: granted === 1, previous: parseHolder(previous), mailbox };
  }

  async renewStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number): Promise<boolean> {
    return (await this.#redis.sbRenew(this.#keys.standalone(userKey, sessionId), `${this.replicaId} ${streamId}`, wholeMs(ttlMs, 'renewStandalone'))) === 1;
  }

  async releaseStandalone(userKey: string, sessionId: string, streamId: string): Promise<void> {
    await this.#redis.sbRelease(this.#keys.standalone(userKey, sessionId), `${this.replicaId} ${streamId}`);
  }

  async standaloneHolder(userKey: string, sessionId: string): Promise<StreamHolder | undefined> {
    return parseHolder((await this.#redis.get(this.#keys.standalone(userKey, sessionId))) ?? '');
  }

  async holdStream(key: StreamKey, ttlMs: number): Promise<void> {
    await this.#redis.set(this.#keys.hold(key), this.replicaId, 'PX', wholeMs(ttlMs, 'holdStream'));
  }

  async releaseStream(key: StreamKey): Promise<void> {
    await this.#redis.sbRelease(this.#keys.hold(key), this.replicaId);
  }

  async streamHolder(key: StreamKey): Promise<string | undefined> {
    return (await this.#redis.get(this.#keys.hold(key))) ?? undefined;
  }

  async watchStream(key: StreamKey, onEvents: (events: StoredEvent[]) => void): Promise<() => Promise<void>> {
    const channel = this.#keys.streamChannel(this.#prefix, key);
    let set = this.#watchers.get(channel);
    if (!set) {
      set = new Set();
      this.#watchers.set(channel, set);
      await (this.#sharded ? this.#subscriber.ssubscribe(channel) : this.#subscriber.subscribe(channel));
    }
    set.add(onEvents);
    return async () => {
      const current = this.#watchers.get(channel);
      current?.delete(onEvents);
      if (current && current.size === 0) {
        this.#watchers.delete(channel);
        await (this.#sharded ? this.#subscriber.sunsubscribe(channel) : this.#subscriber.unsubscribe(channel)).catch(() => {});
      }
    };
  }

  async send(replicaId: string, message: ReplicaMessage): Promise<void> {
    await this.#redis.publish(this.#keys.replicaChannel(this.#prefix, replicaId), JSON.stringify(message));
  }

  async broadcast(message: ReplicaMessage): Promise<void> {
    await this.#redis.publish(this.#everyone, JSON.stringify(message));
  }

  onMessage(handler: (message: ReplicaMessage) => void): void {
    this.#handlers.push(handler);
  }

  async postToMailbox(userKey: string, sessionId: string, data: string, ttlMs: number, maxMessages: number): Promise<void> {
    const ttl = wholeMs(ttlMs, 'postToMailbox');
    const key = this.#keys.mailbox(userKey, sessionId);
    await this.#redis.multi().rpush(key, data).ltrim(key, -maxMessages, -1).pexpire(key, ttl).exec();
  }

  async close(): Promise<void> {
    keepSocketQuiet(this.#subscriber);
    this.#subscriber.disconnect();
  }

  #dispatch(channel: string, text: string): void {
    try {
      if (channel === this.#inbox || channel === this.#everyone) {
        const message = JSON.parse(text) as ReplicaMessage;
        for (const handler of this.#handlers) handler(message);
        return;
      }
      const watchers = this.#watchers.get(channel);
      if (!watchers) return;
      const events = JSON.parse(text) as StoredEvent[];
      for (const watcher of watchers) watcher(events);
    } catch {
      // A malformed message from Redis is dropped; nothing a client sent can produce one.
    }
  }
}

function parseHolder(value: string): StreamHolder | undefined {
  const space = value.indexOf(' ');
  return space > 0 ? { replicaId: value.slice(0, space), streamId: value.slice(space + 1) } : undefined;
}

