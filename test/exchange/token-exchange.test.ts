/**
 * The exchange's cache and its one-at-a-time rule (src/exchange/token-exchange.ts,
 * exchange-cache.ts, one-exchange.ts) as two replicas see them: two TokenExchange instances,
 * each with its own connection to one real Redis, a real authorization server process and
 * real user tokens from a real identity provider.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, beforeEach, describe, test } from 'node:test';
import pino from 'pino';
import type { BackendCaller } from '../../src/backends/backend.js';
import { BackendError } from '../../src/backends/errors.js';
import { SubjectToken } from '../../src/auth/subject-token.js';
import { userKeyOf, type Principal } from '../../src/auth/principal.js';
import { parseConfig } from '../../src/config/load.js';
import type { BackendConfig } from '../../src/config/schema.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { reuseUntil, UNKNOWN_LIFETIME_MS } from '../../src/exchange/exchange-cache.js';
import { TokenExchange } from '../../src/exchange/token-exchange.js';
import { Metrics } from '../../src/ops/metrics.js';
import { RedisStore } from '../../src/state/redis-store.js';
import { exchangesOf, startExchangeServer, type ExchangeServer } from '../helpers/exchange.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let server: ExchangeServer;
let a: RedisStore;
let b: RedisStore;
const cipher = createTokenCipher('token-exchange-unit-test-key-0123456789');

before(async () => {
  [redis, idp] = await Promise.all([startRedis(), startOAuthServer()]);
  server = await startExchangeServer({ idpIssuer: idp.issuer });
});

after(async () => {
  await Promise.allSettled([a?.close(), b?.close()]);
  await Promise.allSettled([server?.stop(), idp?.stop(), redis?.stop()]);
});

beforeEach(async () => {
  await Promise.allSettled([a?.close(), b?.close()]);
  // A fresh prefix per test: each starts with an empty cache and no failure notes.
  const keyPrefix = `sb-exchange-${randomBytes(4).toString('hex')}:`;
  a = new RedisStore({ url: redis.url, keyPrefix });
  b = new RedisStore({ url: redis.url, keyPrefix });
  await Promise.all([a.ready(), b.ready()]);
});

function backend(tokenUrl = server.tokenUrl): BackendConfig {
  const config = parseConfig({
    publicUrl: 'http://127.0.0.1:1',
    auth: { issuer: idp.issuer, audience: 'gateway' },
    backends: [{ name: 'hr', url: 'http://127.0.0.1:2/mcp', tokenExchange: { tokenUrl, clientId: server.clientId, clientSecret: server.clientSecret, audience: 'hr-api' } }],
  });
  return config.backends[0]!;
}

const replica = (store: RedisStore, metrics = new Metrics({ openStreams: () => 0, activeSessions: async () => 0 })) => ({
  exchange: new TokenExchange({ store, cipher, metrics, issuer: idp.issuer }),
  metrics,
});

async function caller(sub: string, withToken = true): Promise<BackendCaller> {
  const principal = { iss: idp.issuer, sub, userKey: userKeyOf(idp.issuer, sub) } as Principal;
  const token = withToken ? new SubjectToken(await idp.token({ sub, aud: 'gateway' })) : undefined;
  return { principal, subjectToken: token, log: pino({ level: 'silent' }) };
}

const exchangesFor = async (sub: string) => exchangesOf(await server.exchanges(), sub).length;

async function counted(metrics: Metrics, outcome: string): Promise<number> {
  const values = (await metrics.tokenExchanges.get()).values;
  return values.filter((v) => v.labels.outcome === outcome).reduce((sum, v) => sum + v.value, 0);
}

describe('one exchange per user and target, across replicas', () => {
  test('twenty requests at once on two replicas: one exchange, one token for all', async () => {
    const [ra, rb] = [replica(a), replica(b)];
    const alice = await caller('alice');
    const hr = backend();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? ra : rb).exchange.authorizationFor(alice, hr)));
    assert.equal(new Set(answers).size, 1);
    assert.match(answers[0]!, /^Bearer ey/);
    assert.equal(await exchangesFor('alice'), 1);
    assert.equal((await counted(ra.metrics, 'ok')) + (await counted(rb.metrics, 'ok')), 1);
    // Another user is another exchange.
    assert.notEqual(await rb.exchange.authorizationFor(await caller('bob'), hr), answers[0]);
    assert.equal(await exchangesFor('bob'), 1);
  });

  test('a token two replicas saw refused at once is exchanged again once', async () => {
    const [ra, rb] = [replica(a), replica(b)];
    const alice = await caller('alice');
    const hr = backend();
    const before = await exchangesFor('alice');
    const first = await ra.exchange.authorizationFor(alice, hr);
    const [x, y] = await Promise.all([ra.exchange.authorizationFor(alice, hr, { rejected: first }), rb.exchange.authorizationFor(alice, hr, { rejected: first })]);
    assert.equal(x, y);
    assert.notEqual(x, first);
    assert.equal(await exchangesFor('alice'), before + 2);
    assert.equal(await rb.exchange.authorizationFor(alice, hr), x, 'the fresh one is the cached one now');
  });

  test('an endpoint that is down is asked once; every waiting request gets its error, naming the backend', async () => {
    const [ra, rb] = [replica(a), replica(b)];
    const alice = await caller('alice');
    const down = backend(`http://127.0.0.1:${await freePort()}/token`);
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => (i % 2 ? ra : rb).exchange.authorizationFor(alice, down)));
    for (const r of results) {
      assert.equal(r.status, 'rejected');
      const err = (r as PromiseRejectedResult).reason as BackendError;
      assert.ok(err instanceof BackendError);
      assert.equal(err.backend, 'hr');
      assert.deepEqual(err.data, { backend: 'hr', reason: 'token_exchange', exchange: 'unavailable', signInAgain: false });
    }
    assert.equal((await counted(ra.metrics, 'unavailable')) + (await counted(rb.metrics, 'unavailable')), 1, 'one attempt');
  });
});

describe('the cache at rest', () => {
  test('sealed under the user\'s key: no token in Redis, and a value copied to another user opens for nobody', async () => {
    const { exchange } = replica(a);
    const alice = await caller('alice');
    const hr = backend();
    const authorization = (await exchange.authorizationFor(alice, hr))!;
    // Values live under `v:` in the store's prefix.
    const keys = (await a.redis.keys('*')).filter((k) => k.startsWith(`${a.keyPrefix}v:exchange:`));
    assert.equal(keys.length, 1);
    const aliceKey = keys[0]!.slice(`${a.keyPrefix}v:`.length);
    const sealed = (await a.getValue(aliceKey))!;
    assert.ok(!sealed.includes(authorization.slice('Bearer '.length)));
    const ttl = await a.redis.pttl(`v:${aliceKey}`);
    assert.ok(ttl > 200_000 && ttl <= 240_000, `kept until a minute before it expires (TTL ${ttl} ms of a 300 s token)`);

    const mallory = await caller('mallory', false);
    const malloryKey = aliceKey.replace(alice.principal.userKey, mallory.principal.userKey);
    await a.putValue(malloryKey, sealed, 60_000);
    assert.equal(await exchange.authorizationFor(mallory, hr), undefined, 'does not open under another key');
    assert.equal(await a.getValue(malloryKey), undefined, 'and is deleted');
    assert.equal(await exchange.authorizationFor(await caller('alice', false), hr), authorization, 'a path without a request reads the cache');
  });

  test('reused until shortly before expiry; a short-lived token for half its life; an unknown lifetime briefly', () => {
    const now = 1_000_000;
    assert.equal(reuseUntil({ accessToken: 't', expiresAt: now + 3_600_000 }, now), now + 3_540_000);
    assert.equal(reuseUntil({ accessToken: 't', expiresAt: now + 30_000 }, now), now + 15_000);
    assert.equal(reuseUntil({ accessToken: 't' }, now), now + UNKNOWN_LIFETIME_MS);
  });
});
