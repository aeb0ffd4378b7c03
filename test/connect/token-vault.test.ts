/**
 * The token vault (SPEC §4 step 4) on the memory store and on a real Redis: round trip,
 * no plaintext at rest, values bound to their user and provider, delete.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createTokenCipher } from '../../src/state/secrets.js';
import { DEFAULT_RETENTION_MS, TokenVault } from '../../src/connect/token-vault.js';
import type { ProviderTokens } from '../../src/providers/provider-client.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { RedisStore } from '../../src/state/redis-store.js';
import type { StateStore } from '../../src/state/store.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const ALICE = 'aliceUserKeyDigest0123456789abcd';
const BOB = 'bobUserKeyDigest0123456789abcdef';
const TOKENS: ProviderTokens = {
  accessToken: 'gho_PLAINTEXT_ACCESS_TOKEN_alice',
  refreshToken: 'ghr_PLAINTEXT_REFRESH_TOKEN_alice',
  expiresAt: 1_900_000_000_000,
  scope: 'repo',
  tokenType: 'Bearer',
};

function recordingLog() {
  const lines: string[] = [];
  return { lines, warn: (obj: object, msg: string) => void lines.push(`${msg} ${JSON.stringify(obj)}`) };
}

function vaultContract(name: string, makeStore: () => Promise<StateStore>, extra?: (ctx: { store: () => StateStore }) => void) {
  describe(name, () => {
    let store: StateStore;
    const cipher = createTokenCipher('t'.repeat(32));
    before(async () => {
      store = await makeStore();
    });
    after(async () => {
      await store?.close();
    });

    test('round trip, per user and provider; delete', async () => {
      const vault = new TokenVault(store, cipher);
      assert.equal(await vault.get(ALICE, 'github'), undefined);
      await vault.put(ALICE, 'github', TOKENS);
      assert.deepEqual(await vault.get(ALICE, 'github'), TOKENS);
      assert.equal(await vault.get(BOB, 'github'), undefined, 'another user has nothing');
      assert.equal(await vault.get(ALICE, 'gitlab'), undefined, 'another provider has nothing');
      const minimal: ProviderTokens = { accessToken: 'only-access', tokenType: 'Bearer' };
      await vault.put(ALICE, 'gitlab', minimal);
      assert.deepEqual(await vault.get(ALICE, 'gitlab'), minimal);
      assert.equal(await vault.delete(ALICE, 'github'), true);
      assert.equal(await vault.delete(ALICE, 'github'), false);
      assert.equal(await vault.get(ALICE, 'github'), undefined);
      assert.deepEqual(await vault.get(ALICE, 'gitlab'), minimal);
    });

    test('a link keeps the issuer of the authorization server that issued it (issue 42 §6)', async () => {
      const vault = new TokenVault(store, cipher);
      const linked: ProviderTokens = { ...TOKENS, issuer: 'https://as2.example.com' };
      await vault.put(ALICE, 'moving', linked);
      assert.deepEqual(await vault.get(ALICE, 'moving'), linked);
    });

    test('the stored value is sealed: no plaintext token in it', async () => {
      const vault = new TokenVault(store, cipher);
      await vault.put(ALICE, 'github', TOKENS);
      const raw = await store.getValue(`vault:${ALICE}:github`);
      assert.ok(raw);
      assert.ok(!raw.includes('PLAINTEXT'), 'no token text');
      assert.ok(!raw.includes('accessToken'), 'not even the JSON field names');
    });

    test("a value copied under another user's key does not open; it is deleted, and nothing secret is logged", async () => {
      const log = recordingLog();
      const vault = new TokenVault(store, cipher, { log });
      await vault.put(ALICE, 'github', TOKENS);
      const raw = (await store.getValue(`vault:${ALICE}:github`))!;
      await store.putValue(`vault:${BOB}:github`, raw);
      assert.equal(await vault.get(BOB, 'github'), undefined);
      assert.equal(await store.getValue(`vault:${BOB}:github`), undefined, 'the foreign value is deleted');
      await store.putValue(`vault:${ALICE}:gitlab`, raw);
      assert.equal(await vault.get(ALICE, 'gitlab'), undefined, 'bound to the provider too');
      assert.deepEqual(await vault.get(ALICE, 'github'), TOKENS, "the owner's value is untouched");
      assert.equal(log.lines.length, 2);
      for (const line of log.lines) assert.ok(!line.includes('PLAINTEXT') && !line.includes(raw), line);
    });

    test('a tampered value or one sealed with another key is treated as absent', async () => {
      const vault = new TokenVault(store, cipher);
      await vault.put(ALICE, 'github', TOKENS);
      const raw = (await store.getValue(`vault:${ALICE}:github`))!;
      await store.putValue(`vault:${ALICE}:github`, `${raw.slice(0, -4)}AAAA`);
      assert.equal(await vault.get(ALICE, 'github'), undefined);
      await new TokenVault(store, createTokenCipher('o'.repeat(32))).put(ALICE, 'github', TOKENS);
      assert.equal(await vault.get(ALICE, 'github'), undefined);
      await store.putValue(`vault:${ALICE}:github`, 'garbage');
      assert.equal(await vault.get(ALICE, 'github'), undefined);
    });

    test('keys are checked: a malformed user key or provider is refused without echoing it', async () => {
      const vault = new TokenVault(store, cipher);
      await assert.rejects(vault.put('alice:evil', 'github', TOKENS), (err: Error) => !err.message.includes('evil'));
      await assert.rejects(vault.get('alice:evil', 'github'), (err: Error) => !err.message.includes('evil'));
      await assert.rejects(vault.put(ALICE, 'Git:Hub', TOKENS), (err: Error) => !err.message.includes('Git:Hub'));
      assert.equal(await vault.get(ALICE, 'Git:Hub'), undefined, 'an invalid provider name (say, from a URL) has nothing stored');
      assert.equal(await vault.delete(ALICE, 'Git:Hub'), false);
      await assert.rejects(vault.put(ALICE, 'github', { ...TOKENS, accessToken: '' }));
    });

    extra?.({ store: () => store });
  });
}

vaultContract('token vault on the memory store', async () => new MemoryStore());

describe('token vault on a real Redis', () => {
  let redis: RedisHandle;
  const prefix = `sb-vault-${randomBytes(4).toString('hex')}:`;
  before(async () => {
    redis = await startRedis();
  });
  after(async () => {
    await redis?.stop();
  });

  vaultContract(
    'contract',
    async () => {
      const store = new RedisStore({ url: redis.url, keyPrefix: prefix });
      await store.ready();
      return store;
    },
    () => {
      test('the raw Redis value (read with ioredis) holds no plaintext token and has the retention TTL', async () => {
        const store = new RedisStore({ url: redis.url, keyPrefix: prefix });
        const raw = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
        raw.on('error', () => undefined);
        try {
          await store.ready();
          await raw.connect();
          await new TokenVault(store, createTokenCipher('t'.repeat(32))).put(ALICE, 'github', TOKENS);
          const key = `${prefix}v:vault:${ALICE}:github`;
          const value = await raw.get(key);
          assert.ok(value, `value at ${key}`);
          assert.ok(!value.includes(TOKENS.accessToken) && !value.includes(TOKENS.refreshToken!) && !value.includes('PLAINTEXT'));
          const ttl = await raw.pttl(key);
          assert.ok(ttl > DEFAULT_RETENTION_MS - 60_000 && ttl <= DEFAULT_RETENTION_MS, `ttl ${ttl}`);
        } finally {
          raw.disconnect();
          await store.close();
        }
      });
    },
  );
});
