/**
 * `/login` costs the store nothing (issue 13 §2: 2,000 unauthenticated GET /login in 8 s left
 * 2,000 keys of ~2.2 KB for 10 minutes): the pending sign-in travels in the signed pre-login
 * cookie (src/browser/pending-login.ts). On a real Redis with the real OAuth server: 200
 * requests add no key; sign-in still completes, once; `returnTo` is bounded and so is the
 * cookie, however many sign-ins one browser starts; concurrent tabs each finish theirs.
 * (The browser journeys and the attacks: login.test.ts, in Chromium.)
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { MAX_PENDING } from '../../src/browser/pending-login.js';
import { RedisStore } from '../../src/state/redis-store.js';
import { startLoginApp, type LoginApp, type WhoAmI } from '../helpers/login-app.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const PREFIX = `sblogin-${randomUUID()}:`;

let oauth: OAuthHandle;
let redis: RedisHandle;
let client: Redis;
let login: LoginApp;

before(async () => {
  [oauth, redis] = await Promise.all([startOAuthServer(), startRedis()]);
  client = new Redis(redis.url);
  const store = new RedisStore({ url: redis.url, keyPrefix: PREFIX });
  await store.ready();
  login = await startLoginApp({ issuer: oauth.issuer, listen: false, store });
});

after(async () => {
  client?.disconnect();
  await login?.close();
  await Promise.all([redis?.stop(), oauth?.stop()]);
});

async function keys(): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  let rounds = 0;
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0' && ++rounds < 100);
  return found;
}

/** `GET /login` as a browser holding `cookie`: the authorization URL and the new pre-login cookie. */
async function startLogin(query: string, cookie?: string): Promise<{ authorize: URL; cookie: string }> {
  const res = await login.app.inject({ method: 'GET', url: `/login?${query}`, headers: cookie ? { cookie } : {} });
  assert.equal(res.statusCode, 303);
  const set = String(res.headers['set-cookie']);
  return { authorize: new URL(res.headers.location as string), cookie: set.slice(0, set.indexOf(';')) };
}

/** The authorization server's redirect back: the callback path and query. */
async function atIssuer(authorize: URL): Promise<string> {
  const res = await fetch(authorize, { redirect: 'manual', signal: AbortSignal.timeout(5_000) });
  const back = new URL(res.headers.get('location')!);
  return back.pathname + back.search;
}

async function callback(path: string, cookie: string): Promise<{ status: number; location?: string; session?: string }> {
  const res = await login.app.inject({ method: 'GET', url: path, headers: { cookie } });
  const set = res.headers['set-cookie'];
  return { status: res.statusCode, location: res.headers.location as string | undefined, session: set ? String(set).slice(0, String(set).indexOf(';')) : undefined };
}

describe('/login without server-side state', () => {
  test('200 unauthenticated GET /login add no key to Redis', { timeout: 60_000 }, async () => {
    const before = await keys();
    for (let n = 0; n < 200; n++) {
      const res = await login.app.inject({ method: 'GET', url: `/login?returnTo=${encodeURIComponent(`/connect?elicitationId=${n}`)}&login_hint=u${n}` });
      assert.equal(res.statusCode, 303);
    }
    assert.deepEqual(await keys(), before);
  });

  test('sign-in still completes, once; what it stores is the browser session and a small used-state marker', { timeout: 60_000 }, async () => {
    const before = await keys();
    const started = await startLogin('returnTo=/whoami&login_hint=alice');
    const back = await atIssuer(started.authorize);
    const done = await callback(back, started.cookie);
    assert.equal(done.status, 303);
    assert.equal(done.location, '/whoami');
    const who = (await login.app.inject({ method: 'GET', url: '/whoami', headers: { cookie: done.session! } })).json<WhoAmI>();
    assert.equal(who.sub, 'alice');
    const added = (await keys()).filter((k) => !before.includes(k));
    assert.equal(added.length, 2, added.join(' '));
    const used = added.find((k) => k.includes('login-used:'))!;
    assert.ok(used && (await client.pttl(used)) <= 10 * 60_000);

    const replay = await callback(back, started.cookie);
    assert.equal(replay.status, 400, 'a replayed callback is refused');
  });

  test('returnTo is bounded; one browser keeps its newest sign-ins in a cookie under 4 KiB; tabs finish their own', { timeout: 60_000 }, async () => {
    const long = `/x?${'a'.repeat(600)}`;
    const tooLong = await startLogin(`returnTo=${encodeURIComponent(long)}&login_hint=bob`);
    assert.equal((await callback(await atIssuer(tooLong.authorize), tooLong.cookie)).location, '/connections');

    let cookie: string | undefined;
    const starts: URL[] = [];
    for (let n = 0; n < MAX_PENDING + 3; n++) {
      const started = await startLogin(`returnTo=${encodeURIComponent(`/y?${String(n).repeat(500).slice(0, 500)}`)}&login_hint=carol`, cookie);
      cookie = started.cookie;
      starts.push(started.authorize);
      assert.ok(cookie.length < 4096, `pre-login cookie of ${cookie.length} bytes`);
    }
    const oldest = await callback(await atIssuer(starts[0]!), cookie!);
    assert.equal(oldest.status, 403, 'beyond the newest sign-ins, the oldest is forgotten');
    const newest = await callback(await atIssuer(starts.at(-1)!), cookie!);
    assert.equal(newest.status, 303);
    assert.match(newest.location!, /^\/y\?6{400}/);
    const previous = await callback(await atIssuer(starts.at(-2)!), cookie!);
    assert.equal(previous.status, 303, 'a second tab finishes its own sign-in too');
  });
});
