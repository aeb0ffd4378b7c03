/**
 * What an idle session costs the replica (issue 45 §3): sessions live in Redis (SPEC §8), so
 * once a session has been left alone for the cache's age its record is no longer held in
 * process, and its next message reads it back from the store (which slides its idle TTL
 * there). On a real redis-server through the real RedisStore; the cache's sweep runs on its
 * own timer, so the test waits it out (about 5 to 10 s).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { Principal } from '../../src/auth/principal.js';
import { SESSION_CACHE_MAX_AGE_MS, SessionService, newSessionId } from '../../src/sessions/session-service.js';
import { RedisKeys } from '../../src/state/redis-keys.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { SessionRecord } from '../../src/state/store.js';
import { waitUntil } from '../helpers/child.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const IDLE_TTL_MS = 600_000;
const record: SessionRecord = { backend: 'idle-b', backendSessionId: 'backend-session-1', protocolVersion: '2025-11-25', clientCapabilities: { roots: { listChanged: true } }, createdAt: 1_700_000_000_000 };

let redis: RedisHandle;
let store: RedisStore;
let sessions: SessionService;

before(async () => {
  redis = await startRedis();
  store = new RedisStore({ url: redis.url, keyPrefix: `sbidle-${randomUUID()}:` });
  await store.ready();
  sessions = new SessionService(store, IDLE_TTL_MS);
});

after(async () => {
  sessions?.close();
  await store?.close();
  await redis?.stop();
});

const principalFor = (userKey: string) => ({ userKey }) as Principal;

test('an idle session leaves the replica within twice the cache age and comes back from Redis on its next message', async () => {
  const users = Array.from({ length: 5 }, () => `user-${randomUUID()}`);
  const ids = users.flatMap((user) => Array.from({ length: 20 }, () => ({ user, id: newSessionId() })));
  for (const { user, id } of ids) await sessions.create(principalFor(user), id, record);
  assert.equal(sessions.cachedRecords, ids.length, 'a new session is cached: its first messages need no store read');

  await waitUntil(async () => (sessions.cachedRecords === 0 ? true : undefined), { what: 'the idle records to leave the cache', timeoutMs: 2 * SESSION_CACHE_MAX_AGE_MS + 2_000, intervalMs: 100 });

  const { user, id } = ids[7]!;
  const key = new RedisKeys(false).session(user, id);
  await store.redis.pexpire(key, 60_000);
  const found = await sessions.find({ userKey: user }, id, 'idle-b');
  assert.deepEqual(found, record, 'the record read back from Redis is the one stored');
  assert.ok((await store.redis.pttl(key)) > 60_000, 'the read went to the store: it slid the idle TTL there');
  assert.equal(sessions.cachedRecords, 1, 'the session in use is cached again');
  assert.equal(await sessions.find({ userKey: 'someone-else' }, id, 'idle-b'), undefined, "another user's token still finds nothing");
  assert.equal(sessions.cachedRecords, 1);
});
