/**
 * The Redis key names of the store and the coordinator, in one place, because in Redis
 * Cluster they are also a placement decision (SPEC §8 "Redis", issue 17).
 *
 * A Lua script, a MULTI and SPUBLISH from a script may touch only keys of ONE hash slot in a
 * cluster (CROSSSLOT otherwise). Every operation that touches several keys touches the keys
 * of one user: a session, the user's session index and in-use marks (CREATE_SESSION,
 * TOUCH_SESSION, DELETE_SESSION, the in-use marks), a replay log, the user's log sizes and log order and the stream's channel (APPEND_EVENTS),
 * the standalone holder and the session's mailbox (coordinator CLAIM). So in cluster mode
 * the user part of every key is a hash tag, `{<userKey>}` (Redis hashes only what is between
 * the first `{` and the next `}`), and all of one user's keys live in one slot; different
 * users spread over the cluster.
 *
 * Standalone and sentinel keep the untagged names they always had (`s:<user>:<session>`…):
 * one Redis holds every slot, a tag would buy nothing, and a rolling upgrade of a running
 * deployment keeps its sessions, replay logs and leases. A cluster is a new Redis anyway
 * (moving data from a standalone Redis into a cluster is a migration of its own).
 *
 * Keyed values (`v:<key>`: elicitations, vault entries, OAuth `state`, locks; their names in
 * value-keys.ts) are only ever touched one key at a time, so they need no tag and spread by
 * their whole name. The rate limiter's counters (`rl:<user>`) share one tag in a cluster
 * (batched-rate-limit-store.ts), so that a flush of every user's counts stays one call.
 *
 * Names are relative to the client's keyPrefix (ioredis adds it to keys); channels are not
 * keys for ioredis' classic PUBLISH, so the channel names carry the prefix.
 */
import type { StreamKey } from './store.js';

/** The rate limiter's counters: `<redis.keyPrefix>rl:<userKey>` (http/rate-limit.ts). */
export const RATE_LIMIT_NAMESPACE = 'rl:';

export class RedisKeys {
  /** @param tagged true in cluster mode: the user part becomes a hash tag. */
  constructor(readonly tagged: boolean) {}

  /** The user part of a key: `{<userKey>}` in cluster mode, else `<userKey>`. */
  user(userKey: string): string {
    return this.tagged ? `{${userKey}}` : userKey;
  }

  session(userKey: string, sessionId: string): string {
    return `s:${this.user(userKey)}:${sessionId}`;
  }

  /**
   * The user's sessions by last use (a sorted set, score: microseconds; issue 13
   * `sessions.maxPerUser`, issue 28 §7 the eviction order).
   */
  sessionIndex(userKey: string): string {
    return `si:${this.user(userKey)}`;
  }

  /** The user's sessions marked in use, until when (a sorted set, score: microseconds). */
  sessionsInUse(userKey: string): string {
    return `su:${this.user(userKey)}`;
  }

  stream(k: StreamKey): string {
    return `e:${this.user(k.userKey)}:${k.sessionId}:${k.streamId}`;
  }

  /** Sizes of the user's replay logs (a hash; issue 13 `streams.replayBytesPerUser`). */
  streamSizes(userKey: string): string {
    return `eb:${this.user(userKey)}`;
  }

  /** The user's replay logs by last append (a sorted set). */
  streamOrder(userKey: string): string {
    return `eo:${this.user(userKey)}`;
  }

  /** The channel a stream's appended events are published on (with the prefix: see above). */
  streamChannel(keyPrefix: string, k: StreamKey): string {
    return `${keyPrefix}ev:${this.user(k.userKey)}:${k.sessionId}:${k.streamId}`;
  }

  /** Who holds the session's standalone stream ("<replica> <stream>"). */
  standalone(userKey: string, sessionId: string): string {
    return `g:${this.user(userKey)}:${sessionId}`;
  }

  mailbox(userKey: string, sessionId: string): string {
    return `m:${this.user(userKey)}:${sessionId}`;
  }

  /** The replica reading a detached stream. */
  hold(k: StreamKey): string {
    return `h:${this.user(k.userKey)}:${k.sessionId}:${k.streamId}`;
  }

  /** A keyed value (`StateStore.putValue`…), by its name from value-keys.ts. */
  value(name: string): string {
    return `v:${name}`;
  }

  /** A map of fields (`StateStore.putField`…: tool-definition pins), by its name from value-keys.ts. */
  fields(name: string): string {
    return `f:${name}`;
  }

  /** What SCAN matches to count sessions (with the prefix: SCAN patterns are not prefixed by ioredis). */
  sessionPattern(keyPrefix: string): string {
    return `${keyPrefix}s:*`;
  }

  /** A replica's own channel (what `Coordinator.send` addresses to it). */
  replicaChannel(keyPrefix: string, replicaId: string): string {
    return `${keyPrefix}replica:${replicaId}`;
  }

  /** The channel every replica listens on (broadcasts). */
  broadcastChannel(keyPrefix: string): string {
    return `${keyPrefix}replicas`;
  }
}
