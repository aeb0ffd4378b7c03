/**
 * The usable third-party token (SPEC §4 step 5): stored tokens while fresh, a refresh near
 * expiry, one refresh at a time across replicas (two vaults on one real Redis),
 * `invalid_grant` → unlinked, provider down → error with the tokens kept.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, beforeEach, describe, test } from 'node:test';
import { ProviderError, type ProviderEndpoints, type ProviderTokens } from '../../src/providers/provider-client.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { TokenVault } from '../../src/connect/token-vault.js';
import { usableToken, type RefreshOutcome } from '../../src/connect/usable-token.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { RedisStore } from '../../src/state/redis-store.js';
import { sendJson, startHttpFixture, type HttpFixture } from '../fixtures/provider-http-fixture.js';
import { freePort } from '../helpers/free-port.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const USER = 'userKeyDigestForUsableToken0123';
const PROVIDER = 'github';
const cipher = createTokenCipher('u'.repeat(32));

/** A token endpoint that counts refreshes; its behaviour is switched per test. */
let mode: 'ok' | 'invalid_grant' | 'slow' = 'ok';
let issued = 0;
let fx: HttpFixture;

function endpoints(tokenUrl = `${fx.origin}/token`): ProviderEndpoints {
  return { authorizationUrl: `${fx.origin}/authorize`, tokenUrl, clientId: 'sb', scopes: ['repo'] };
}

function refreshes(): number {
  return fx.hits('/token').length;
}

function metrics() {
  const outcomes: RefreshOutcome[] = [];
  const lines: string[] = [];
  return {
    outcomes,
    lines,
    onRefresh: (o: RefreshOutcome) => void outcomes.push(o),
    log: { warn: (obj: object, msg: string) => void lines.push(`${msg} ${JSON.stringify(obj)}`) },
  };
}

const stale = (over: Partial<ProviderTokens> = {}): ProviderTokens => ({
  accessToken: 'at-old-SECRET',
  refreshToken: 'rt-old-SECRET',
  expiresAt: Date.now() + 30_000, // within the default 60 s skew
  scope: 'repo',
  tokenType: 'Bearer',
  ...over,
});

before(async () => {
  fx = await startHttpFixture(async (req, res) => {
    if (req.path !== '/token') return;
    if (mode === 'invalid_grant') return sendJson(res, 400, { error: 'invalid_grant' });
    if (mode === 'slow') await sleep(400);
    issued++;
    sendJson(res, 200, { access_token: `at-new-${issued}`, refresh_token: `rt-new-${issued}`, token_type: 'Bearer', expires_in: 3600 });
  });
});
after(async () => {
  await fx?.close();
});
beforeEach(() => {
  mode = 'ok';
  fx.requests.length = 0;
});

describe('usable token on one replica (memory store)', () => {
  let store: MemoryStore;
  let vault: TokenVault;
  beforeEach(() => {
    store = new MemoryStore();
    vault = new TokenVault(store, cipher);
  });

  test('nothing stored → undefined', async () => {
    assert.equal(await usableToken({ vault, store }, USER, PROVIDER, endpoints()), undefined);
    assert.equal(refreshes(), 0);
  });

  test('a fresh token is returned without a refresh; so is one without an expiry', async () => {
    const fresh = stale({ expiresAt: Date.now() + 3_600_000 });
    await vault.put(USER, PROVIDER, fresh);
    assert.deepEqual(await usableToken({ vault, store }, USER, PROVIDER, endpoints()), fresh);
    const forever = stale({ expiresAt: undefined });
    delete forever.expiresAt;
    await vault.put(USER, PROVIDER, forever);
    assert.deepEqual(await usableToken({ vault, store }, USER, PROVIDER, endpoints()), forever);
    assert.equal(refreshes(), 0);
  });

  test('a token near expiry is refreshed once, stored, and the granted scope kept', async () => {
    const m = metrics();
    await vault.put(USER, PROVIDER, stale());
    const got = await usableToken({ vault, store, onRefresh: m.onRefresh }, USER, PROVIDER, endpoints());
    assert.equal(refreshes(), 1);
    assert.match(got!.accessToken, /^at-new-/);
    assert.match(got!.refreshToken!, /^rt-new-/);
    assert.equal(got!.scope, 'repo', 'kept from before: the response had no scope');
    assert.deepEqual(await vault.get(USER, PROVIDER), got);
    assert.equal(fx.hits('/token')[0]!.form.get('refresh_token'), 'rt-old-SECRET');
    assert.deepEqual(m.outcomes, ['ok']);
    assert.equal(await store.getValue(`lock:refresh:${USER}:${PROVIDER}`), undefined, 'lock released');
    // Now fresh: no second refresh.
    assert.deepEqual(await usableToken({ vault, store }, USER, PROVIDER, endpoints()), got);
    assert.equal(refreshes(), 1);
  });

  test('expired without a refresh token → deleted, undefined; near expiry without one → still returned', async () => {
    const nearly = stale({ refreshToken: undefined, expiresAt: Date.now() + 20_000 });
    delete nearly.refreshToken;
    await vault.put(USER, PROVIDER, nearly);
    assert.deepEqual(await usableToken({ vault, store }, USER, PROVIDER, endpoints()), nearly);
    await vault.put(USER, PROVIDER, { ...nearly, expiresAt: Date.now() - 1 });
    assert.equal(await usableToken({ vault, store }, USER, PROVIDER, endpoints()), undefined);
    assert.equal(await vault.get(USER, PROVIDER), undefined);
    assert.equal(refreshes(), 0);
  });

  test('invalid_grant → tokens deleted, undefined, counted; nothing secret logged', async () => {
    mode = 'invalid_grant';
    const m = metrics();
    await vault.put(USER, PROVIDER, stale());
    assert.equal(await usableToken({ vault, store, ...m }, USER, PROVIDER, endpoints()), undefined);
    assert.equal(await vault.get(USER, PROVIDER), undefined);
    assert.deepEqual(m.outcomes, ['invalid_grant']);
    assert.equal(refreshes(), 1);
    for (const line of m.lines) assert.ok(!line.includes('SECRET'), line);
  });

  test('provider unreachable → ProviderError network, tokens kept, lock released', async () => {
    const m = metrics();
    const port = await freePort();
    const original = stale();
    await vault.put(USER, PROVIDER, original);
    await assert.rejects(
      usableToken({ vault, store, ...m }, USER, PROVIDER, endpoints(`http://127.0.0.1:${port}/token`)),
      (err: unknown) => err instanceof ProviderError && err.kind === 'network' && !err.message.includes('SECRET'),
    );
    assert.deepEqual(await vault.get(USER, PROVIDER), original, 'tokens kept');
    assert.deepEqual(m.outcomes, ['error']);
    assert.equal(await store.getValue(`lock:refresh:${USER}:${PROVIDER}`), undefined);
    for (const line of m.lines) assert.ok(!line.includes('SECRET'), line);
  });

  test('another holder of the lock that never finishes: a still-valid token is returned after the wait, an expired one is an error', async () => {
    await vault.put(USER, PROVIDER, stale());
    await store.putValueIfAbsent(`lock:refresh:${USER}:${PROVIDER}`, 'someone-else', 30_000);
    const started = Date.now();
    const got = await usableToken({ vault, store }, USER, PROVIDER, endpoints(), { waitForOtherRefreshMs: 300, pollIntervalMs: 50 });
    assert.equal(got!.accessToken, 'at-old-SECRET');
    assert.ok(Date.now() - started < 3_000);
    await vault.put(USER, PROVIDER, stale({ expiresAt: Date.now() - 1_000 }));
    await assert.rejects(usableToken({ vault, store }, USER, PROVIDER, endpoints(), { waitForOtherRefreshMs: 200, pollIntervalMs: 50 }), (err: unknown) => err instanceof ProviderError && err.kind === 'timeout');
    assert.equal(refreshes(), 0);
    assert.equal(await store.getValue(`lock:refresh:${USER}:${PROVIDER}`), 'someone-else', "another's lock is left alone");
  });

  test('a lock released without a new token (the other refresh failed) → this caller takes over', async () => {
    await vault.put(USER, PROVIDER, stale());
    await store.putValueIfAbsent(`lock:refresh:${USER}:${PROVIDER}`, 'someone-else', 30_000);
    setTimeout(() => void store.deleteValue(`lock:refresh:${USER}:${PROVIDER}`), 150);
    const got = await usableToken({ vault, store }, USER, PROVIDER, endpoints(), { pollIntervalMs: 50 });
    assert.match(got!.accessToken, /^at-new-/);
    assert.equal(refreshes(), 1);
  });
});

describe('usable token across replicas (two vaults, one real Redis)', () => {
  let redis: RedisHandle;
  let a: RedisStore;
  let b: RedisStore;
  const prefix = `sb-usable-${randomBytes(4).toString('hex')}:`;
  before(async () => {
    redis = await startRedis();
    a = new RedisStore({ url: redis.url, keyPrefix: prefix });
    b = new RedisStore({ url: redis.url, keyPrefix: prefix });
    await Promise.all([a.ready(), b.ready()]);
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  test('two concurrent callers near expiry → exactly one refresh request; both get the new token', async () => {
    mode = 'slow';
    const vaultA = new TokenVault(a, cipher);
    const vaultB = new TokenVault(b, cipher);
    await vaultA.put(USER, PROVIDER, stale());
    const ma = metrics();
    const mb = metrics();
    const [ta, tb] = await Promise.all([
      usableToken({ vault: vaultA, store: a, onRefresh: ma.onRefresh }, USER, PROVIDER, endpoints(), { pollIntervalMs: 50 }),
      usableToken({ vault: vaultB, store: b, onRefresh: mb.onRefresh }, USER, PROVIDER, endpoints(), { pollIntervalMs: 50 }),
    ]);
    assert.equal(refreshes(), 1, 'one refresh request reached the provider');
    assert.ok(ta && tb);
    assert.equal(ta.accessToken, tb.accessToken);
    assert.match(ta.accessToken, /^at-new-/);
    assert.equal(ma.outcomes.length + mb.outcomes.length, 1);
    assert.deepEqual(await vaultB.get(USER, PROVIDER), ta);
    assert.equal(await a.getValue(`lock:refresh:${USER}:${PROVIDER}`), undefined, 'lock released');
  });

  test('invalid_grant seen by the refreshing replica → the waiting one gets undefined too', async () => {
    mode = 'invalid_grant';
    const vaultA = new TokenVault(a, cipher);
    const vaultB = new TokenVault(b, cipher);
    await vaultA.put(USER, PROVIDER, stale());
    const [ta, tb] = await Promise.all([
      usableToken({ vault: vaultA, store: a }, USER, PROVIDER, endpoints(), { pollIntervalMs: 50 }),
      usableToken({ vault: vaultB, store: b }, USER, PROVIDER, endpoints(), { pollIntervalMs: 50 }),
    ]);
    assert.equal(ta, undefined);
    assert.equal(tb, undefined);
    assert.equal(refreshes(), 1);
    assert.equal(await vaultA.get(USER, PROVIDER), undefined);
  });
});
