/**
 * The gateway's token vault and state, opened from the test process: the same Redis, key
 * prefix and token key as the app, so a test can see what a flow stored (or did not).
 */
import { createTokenCipher } from '../../src/state/secrets.js';
import { TokenVault } from '../../src/connect/token-vault.js';
import { RedisStore } from '../../src/state/redis-store.js';

export interface SharedVault {
  store: RedisStore;
  vault: TokenVault;
  close(): void;
}

export function openSharedVault(redisUrl: string, keyPrefix: string, tokenKey: string): SharedVault {
  const store = new RedisStore({ url: redisUrl, keyPrefix });
  return { store, vault: new TokenVault(store, createTokenCipher(tokenKey)), close: () => store.redis.disconnect() };
}
