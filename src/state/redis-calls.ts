/**
 * Every Redis call of the store (redis-store.ts) and the coordinator (redis-coordinator.ts),
 * each a function of the client and plain arguments: what an operation sends first, and what
 * StoreWaits.again (store-waits.ts) sends again after a blip where that is safe — so no
 * closure is made for a retry while Redis answers (issue 45 §1). Which operations may be sent
 * again, and why, is said at each operation.
 *
 * The `sb…` commands are the Lua scripts of redis-scripts.ts, defined on the client by the
 * store and the coordinator (ioredis `defineCommand`: EVALSHA, EVAL when not cached).
 */
import type { RedisClient } from './redis-connection.js';

interface ScriptCommands {
  sbDeleteIf(key: string, expected: string): Promise<number>;
  sbAppendEvents(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
  sbCreateSession(key: string, index: string, inUse: string, record: string, ttlMs: number, sessionId: string, maxPerUser: number): Promise<string[]>;
  sbTouchSession(key: string, index: string, ttlMs: number, sessionId: string): Promise<string | null>;
  sbDeleteSession(key: string, index: string, inUse: string, sessionId: string): Promise<number>;
  sbMarkSessionsInUse(index: string, inUse: string, leaseMs: number, ...sessionIds: string[]): Promise<number>;
  sbReleaseSessionInUse(index: string, inUse: string, sessionId: string): Promise<number>;
  sbClaim(holderKey: string, mailboxKey: string, value: string, ttlMs: number, force: '0' | '1'): Promise<[number, string, ...string[]]>;
  sbRenew(key: string, value: string, ttlMs: number): Promise<number>;
  sbRenewMany(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  sbRelease(key: string, value: string): Promise<number>;
}

/** The command connection with the scripts defined on it. */
export type ScriptedRedis = RedisClient & ScriptCommands;

type R = ScriptedRedis;

/** The store's calls. */
export const storeCalls = {
  createSession: (r: R, key: string, index: string, inUse: string, record: string, ttl: number, id: string, cap: number) => r.sbCreateSession(key, index, inUse, record, ttl, id, cap),
  replace: (r: R, key: string, record: string, ttl: number) => r.set(key, record, 'PX', ttl, 'XX'),
  touchSession: (r: R, key: string, index: string, ttl: number, id: string) => r.sbTouchSession(key, index, ttl, id),
  deleteSession: (r: R, key: string, index: string, inUse: string, id: string) => r.sbDeleteSession(key, index, inUse, id),
  markInUse: (r: R, index: string, inUse: string, lease: number, ids: readonly string[]) => r.sbMarkSessionsInUse(index, inUse, lease, ...ids),
  releaseInUse: (r: R, index: string, inUse: string, id: string) => r.sbReleaseSessionInUse(index, inUse, id),
  appendEvents: (r: R, keyCount: number, args: (string | number)[]) => r.sbAppendEvents(keyCount, ...args),
  readLog: (r: R, key: string) => r.lrange(key, 0, -1),
  put: (r: R, key: string, value: string, ttl: number | undefined) => (ttl === undefined ? r.set(key, value) : r.set(key, value, 'PX', ttl)),
  get: (r: R, key: string) => r.get(key),
  take: (r: R, key: string) => r.getdel(key),
  putIfAbsent: (r: R, key: string, value: string, ttl: number) => r.set(key, value, 'PX', ttl, 'NX'),
  deleteIf: (r: R, key: string, expected: string) => r.sbDeleteIf(key, expected),
  del: (r: R, key: string) => r.del(key),
  putFieldIfAbsent: (r: R, key: string, field: string, value: string) => r.hsetnx(key, field, value),
  putField: (r: R, key: string, field: string, value: string) => r.hset(key, field, value),
  getFields: (r: R, key: string) => r.hgetall(key),
  deleteField: (r: R, key: string, field: string) => r.hdel(key, field),
};

/** The coordinator's calls. */
export const coordinatorCalls = {
  claim: (r: R, holder: string, mailbox: string, value: string, ttl: number, force: '0' | '1') => r.sbClaim(holder, mailbox, value, ttl, force),
  renew: (r: R, key: string, value: string, ttl: number) => r.sbRenew(key, value, ttl),
  renewMany: (r: R, keys: readonly string[], values: readonly string[], ttl: number) => r.sbRenewMany(keys.length, ...keys, ...values, ttl),
  release: (r: R, key: string, value: string) => r.sbRelease(key, value),
  get: (r: R, key: string) => r.get(key),
  hold: (r: R, key: string, value: string, ttl: number) => r.set(key, value, 'PX', ttl),
  publish: (r: R, channel: string, text: string) => r.publish(channel, text),
  post: (r: R, key: string, data: string, maxMessages: number, ttl: number) => r.multi().rpush(key, data).ltrim(key, -maxMessages, -1).pexpire(key, ttl).exec(),
};
