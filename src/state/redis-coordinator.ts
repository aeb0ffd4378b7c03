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
 *
 * On the store's connection, the coordinator waits out a Redis blip as the store does, with
 * the store's {@link StoreWaits} (the same bound and the same cap; store-waits.ts): each
 * operation says whether it is sent again after a failure that may have run it
 * (`idempotent`) or only after one that certainly did not (`unsent-only`), and why.
 */
import { randomUUID } from 'node:crypto';
import type { Coordinator, ReplicaMessage, StandaloneClaim, StreamHolder } from './coordinator.js';
import { isCluster, keepSocketQuiet, silenceConnectionErrors, subscriberFor, type RedisClient } from './redis-connection.js';
import { coordinatorCalls as calls, type ScriptedRedis } from './redis-calls.js';
import { RedisKeys } from './redis-keys.js';
import { CLAIM_STANDALONE, RELEASE_IF_HELD, RENEW_IF_HELD, RENEW_MANY_IF_HELD } from './redis-scripts.js';
import { StoreWaits } from './store-waits.js';
import { wholeMs } from './ttl.js';
import type { StoredEvent, StreamKey } from './store.js';

export class RedisCoordinator implements Coordinator {
  readonly replicaId = randomUUID();
  readonly #redis: ScriptedRedis;
  readonly #subscriber: RedisClient;
  readonly #keys: RedisKeys;
  /** Stream channels: sharded in a cluster (SSUBSCRIBE), classic otherwise. */
  readonly #sharded: boolean;
  readonly #prefix: string;
  readonly #handlers: Array<(message: ReplicaMessage) => void> = [];
  readonly #watchers = new Map<string, Set<(events: StoredEvent[]) => void>>();
  readonly #inbox: string;
  readonly #everyone: string;
  readonly #waits: StoreWaits;

  /**
   * @param redis the store's command connection (its keyPrefix applies to keys, not channels).
   * @param waits the store's waits (RedisStore.waits); without, nothing waits.
   */
  constructor(redis: RedisClient, keyPrefix: string, waits?: StoreWaits) {
    this.#redis = redis as ScriptedRedis;
    this.#waits = waits ?? new StoreWaits(redis, { waitMs: 0 });
    this.#prefix = keyPrefix;
    this.#sharded = isCluster(redis);
    this.#keys = new RedisKeys(this.#sharded);
    this.#redis.defineCommand('sbClaim', { numberOfKeys: 2, lua: CLAIM_STANDALONE });
    this.#redis.defineCommand('sbRenew', { numberOfKeys: 1, lua: RENEW_IF_HELD });
    this.#redis.defineCommand('sbRenewMany', { lua: RENEW_MANY_IF_HELD });
    this.#redis.defineCommand('sbRelease', { numberOfKeys: 1, lua: RELEASE_IF_HELD });
    // Pub/sub needs a connection of its own. A cluster's resubscribes by itself after a
    // reconnect; another's is subscribed again here (subscriberFor says why).
    this.#subscriber = subscriberFor(redis);
    silenceConnectionErrors(this.#subscriber);
    this.#inbox = this.#keys.replicaChannel(keyPrefix, this.replicaId);
    this.#everyone = this.#keys.broadcastChannel(keyPrefix);
    this.#subscriber.on('message', (channel: string, text: string) => this.#dispatch(channel, text));
    this.#subscriber.on('smessage', (channel: string, text: string) => this.#dispatch(channel, text));
    void this.#subscriber.subscribe(this.#inbox, this.#everyone).catch(() => {});
    if (!this.#sharded) this.#subscribeAgainOnReconnect();
  }

  /**
   * After every `ready` but the first (whose SUBSCRIBE waits in the offline queue), the
   * channels this replica listens on are subscribed again; a failure (the connection closed
   * again, or was closed) is the next reconnect's to repair, or nobody's.
   */
  #subscribeAgainOnReconnect(): void {
    let first = true;
    this.#subscriber.on('ready', () => {
      if (first) {
        first = false;
        return;
      }
      void this.#subscriber.subscribe(this.#inbox, this.#everyone, ...this.#watchers.keys()).catch(() => {});
    });
  }

  /**
   * Unsent-only: a claim that landed unseen took the session's mailbox with it, and a second
   * run would find this replica holding the stream and answer "not granted", the mail lost.
   */
  async claimStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number, force: boolean): Promise<StandaloneClaim> {
    const holder = this.#keys.standalone(userKey, sessionId);
    const mailbox = this.#keys.mailbox(userKey, sessionId);
    const value = `${this.replicaId} ${streamId}`;
    const ttl = wholeMs(ttlMs, 'claimStandalone');
    const forced = force ? '1' : '0';
    let reply: [number, string, ...string[]];
    try {
      reply = await calls.claim(this.#redis, holder, mailbox, value, ttl, forced);
    } catch (err) {
      reply = await this.#waits.again(err, 'unsent-only', calls.claim, this.#redis, holder, mailbox, value, ttl, forced);
    }
    const [granted, previous, ...mail] = reply;
    return { granted: granted === 1, previous: parseHolder(previous), mailbox: mail };
  }

  /** Idempotent: a compare-and-set PEXPIRE to the same TTL. */
  async renewStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number): Promise<boolean> {
    const holder = this.#keys.standalone(userKey, sessionId);
    const value = `${this.replicaId} ${streamId}`;
    const ttl = wholeMs(ttlMs, 'renewStandalone');
    try {
      return (await calls.renew(this.#redis, holder, value, ttl)) === 1;
    } catch (err) {
      return (await this.#waits.again(err, 'idempotent', calls.renew, this.#redis, holder, value, ttl)) === 1;
    }
  }

  /**
   * Idempotent, as renewStandalone. One script call per {@link RENEW_BATCH} claims; in a
   * cluster per user as well, since a script touches the keys of one slot (redis-keys.ts).
   */
  async renewStandalones(claims: readonly StreamKey[], ttlMs: number): Promise<boolean[]> {
    const ttl = wholeMs(ttlMs, 'renewStandalones');
    const held = new Array<boolean>(claims.length).fill(false);
    await Promise.all(
      batchesOf(claims, this.#sharded).map(async (batch) => {
        const keys = batch.map((i) => this.#keys.standalone(claims[i]!.userKey, claims[i]!.sessionId));
        const values = batch.map((i) => `${this.replicaId} ${claims[i]!.streamId}`);
        let answers: number[];
        try {
          answers = await calls.renewMany(this.#redis, keys, values, ttl);
        } catch (err) {
          answers = await this.#waits.again(err, 'idempotent', calls.renewMany, this.#redis, keys, values, ttl);
        }
        batch.forEach((i, n) => (held[i] = answers[n] === 1));
      }),
    );
    return held;
  }

  /** Idempotent: a compare-and-set DEL finds nothing of ours the second time. */
  async releaseStandalone(userKey: string, sessionId: string, streamId: string): Promise<void> {
    const holder = this.#keys.standalone(userKey, sessionId);
    const value = `${this.replicaId} ${streamId}`;
    try {
      await calls.release(this.#redis, holder, value);
    } catch (err) {
      await this.#waits.again(err, 'idempotent', calls.release, this.#redis, holder, value);
    }
  }

  /** Idempotent: GET. */
  async standaloneHolder(userKey: string, sessionId: string): Promise<StreamHolder | undefined> {
    const holder = this.#keys.standalone(userKey, sessionId);
    let value: string | null;
    try {
      value = await calls.get(this.#redis, holder);
    } catch (err) {
      value = await this.#waits.again(err, 'idempotent', calls.get, this.#redis, holder);
    }
    return parseHolder(value ?? '');
  }

  /** Idempotent: SET PX of this replica's id. */
  async holdStream(key: StreamKey, ttlMs: number): Promise<void> {
    const hold = this.#keys.hold(key);
    const ttl = wholeMs(ttlMs, 'holdStream');
    try {
      await calls.hold(this.#redis, hold, this.replicaId, ttl);
    } catch (err) {
      await this.#waits.again(err, 'idempotent', calls.hold, this.#redis, hold, this.replicaId, ttl);
    }
  }

  /** Idempotent: a compare-and-set DEL. */
  async releaseStream(key: StreamKey): Promise<void> {
    const hold = this.#keys.hold(key);
    try {
      await calls.release(this.#redis, hold, this.replicaId);
    } catch (err) {
      await this.#waits.again(err, 'idempotent', calls.release, this.#redis, hold, this.replicaId);
    }
  }

  /** Idempotent: GET. */
  async streamHolder(key: StreamKey): Promise<string | undefined> {
    const hold = this.#keys.hold(key);
    try {
      return (await calls.get(this.#redis, hold)) ?? undefined;
    } catch (err) {
      return (await this.#waits.again(err, 'idempotent', calls.get, this.#redis, hold)) ?? undefined;
    }
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

  /** Unsent-only: a PUBLISH that ran unseen would deliver the message twice. */
  async send(replicaId: string, message: ReplicaMessage): Promise<void> {
    await this.#publish(this.#keys.replicaChannel(this.#prefix, replicaId), JSON.stringify(message));
  }

  /** Unsent-only, as {@link send}. */
  async broadcast(message: ReplicaMessage): Promise<void> {
    await this.#publish(this.#everyone, JSON.stringify(message));
  }

  async #publish(channel: string, text: string): Promise<void> {
    try {
      await calls.publish(this.#redis, channel, text);
    } catch (err) {
      await this.#waits.again(err, 'unsent-only', calls.publish, this.#redis, channel, text);
    }
  }

  onMessage(handler: (message: ReplicaMessage) => void): void {
    this.#handlers.push(handler);
  }

  /** Unsent-only: an RPUSH that ran unseen would post the message twice. */
  async postToMailbox(userKey: string, sessionId: string, data: string, ttlMs: number, maxMessages: number): Promise<void> {
    const ttl = wholeMs(ttlMs, 'postToMailbox');
    const key = this.#keys.mailbox(userKey, sessionId);
    try {
      await calls.post(this.#redis, key, data, maxMessages, ttl);
    } catch (err) {
      await this.#waits.again(err, 'unsent-only', calls.post, this.#redis, key, data, maxMessages, ttl);
    }
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

/** Claims renewed by one script call at most: a call holds Redis for its whole loop. */
export const RENEW_BATCH = 500;

/** Indexes of `claims` in script-sized batches; with `byUser` (a cluster), each batch one user's. */
function batchesOf(claims: readonly StreamKey[], byUser: boolean): number[][] {
  const groups = new Map<string, number[]>();
  claims.forEach((claim, i) => {
    const group = byUser ? claim.userKey : '';
    const indexes = groups.get(group);
    if (indexes) indexes.push(i);
    else groups.set(group, [i]);
  });
  const batches: number[][] = [];
  for (const indexes of groups.values()) for (let start = 0; start < indexes.length; start += RENEW_BATCH) batches.push(indexes.slice(start, start + RENEW_BATCH));
  return batches;
}
