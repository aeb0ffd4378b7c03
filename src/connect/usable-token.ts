/**
 * The token to send a backend with `upstreamAuth` (SPEC §4 step 5): the stored one while
 * it is not near expiry, else a refreshed one (OAuth 2.1 §4.3) — one refresh at a time
 * across replicas, because providers that rotate refresh tokens (OAuth 2.1 §4.3.1)
 * invalidate the old one on first use, and a second, concurrent refresh with it would
 * fail with `invalid_grant` and unlink the account.
 *
 * Coordination is a lock in the shared store (`lock:refresh:<userKey>:<provider>`, SET NX
 * with a TTL well above the provider timeout). The winner refreshes and stores; the others
 * poll the vault until a different token appears (bounded), or take over if the lock
 * disappears without one (the winner failed).
 *
 * Outcomes: tokens → use them; undefined → the caller starts a new elicitation (nothing
 * stored, expired without a refresh token, or the provider answered `invalid_grant`, in
 * which case the tokens are deleted); a thrown ProviderError → a backend error for the
 * client, tokens kept (provider unreachable or slow, or another OAuth error such as
 * `invalid_client`, which is a configuration problem rather than the user's).
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StateStore } from '../state/store.js';
import { ProviderError, refreshTokens, type ProviderEndpoints, type ProviderRequestOptions, type ProviderTokens } from '../providers/provider-client.js';
import type { TokenVault } from './token-vault.js';
import { ValueKeys } from '../state/value-keys.js';
import { dpopKey } from '../backends/dpop.js';

export type RefreshOutcome = 'ok' | 'invalid_grant' | 'error';

/**
 * The provider's endpoints, or how to find them when a refresh needs them: discovery
 * (providers/provider-endpoints.ts) is then asked only when a stored token is due, never
 * for a user who has none. The function is given the tokens about to be refreshed (their
 * `issuer`: a refresh token goes to no other server than the one that issued it).
 */
export type EndpointsSource = ProviderEndpoints | ((stored: ProviderTokens) => Promise<ProviderEndpoints & { request?: ProviderRequestOptions }>);

export interface UsableTokenDeps {
  vault: TokenVault;
  store: StateStore;
  log?: { warn(obj: object, msg: string): void };
  /** Called once per refresh this replica attempted (metrics). */
  onRefresh?(outcome: RefreshOutcome): void;
}

export interface UsableTokenOptions {
  /** Refresh when the token expires within this much (default 60 s). */
  refreshSkewMs?: number;
  /** How long to wait for another replica's refresh (default 10 s). */
  waitForOtherRefreshMs?: number;
  /** Vault polling interval while waiting (default 100 ms). */
  pollIntervalMs?: number;
  /** Lock TTL; must exceed the provider timeout (default 30 s). */
  lockTtlMs?: number;
  /** Passed to the refresh request (timeout, guarded fetch). */
  request?: ProviderRequestOptions;
}

const DEFAULT_SKEW_MS = 60_000;
const DEFAULT_WAIT_MS = 10_000;
const DEFAULT_POLL_MS = 100;
const DEFAULT_LOCK_TTL_MS = 30_000;

export async function usableToken(
  deps: UsableTokenDeps,
  userKey: string,
  provider: string,
  endpoints: EndpointsSource,
  options: UsableTokenOptions = {},
): Promise<ProviderTokens | undefined> {
  const skew = options.refreshSkewMs ?? DEFAULT_SKEW_MS;
  const current = await deps.vault.get(userKey, provider);
  if (!current) return undefined;
  if (!needsRefresh(current, skew)) return current;
  if (!current.refreshToken) {
    if (isExpired(current)) {
      await deps.vault.delete(userKey, provider);
      return undefined;
    }
    return current; // near expiry but still valid, and nothing to refresh with
  }

  const lockKey = ValueKeys.refreshLock(userKey, provider);
  const deadline = Date.now() + (options.waitForOtherRefreshMs ?? DEFAULT_WAIT_MS);
  const pollMs = options.pollIntervalMs ?? DEFAULT_POLL_MS;
  const lockId = randomBytes(16).toString('base64url');
  for (;;) {
    if (await deps.store.putValueIfAbsent(lockKey, lockId, options.lockTtlMs ?? DEFAULT_LOCK_TTL_MS)) {
      try {
        return await refreshHolding(deps, userKey, provider, endpoints, current, skew, options.request);
      } finally {
        await releaseLock(deps.store, lockKey, lockId).catch(() => undefined);
      }
    }
    // Someone else is refreshing: wait for a different token to appear.
    while (Date.now() < deadline) {
      await sleep(pollMs);
      const seen = await deps.vault.get(userKey, provider);
      if (!seen) return undefined; // the other refresh got invalid_grant (or the user disconnected)
      if (seen.accessToken !== current.accessToken && !isExpired(seen)) return seen;
      if ((await deps.store.getValue(lockKey)) === undefined) break; // released: try to take it
    }
    if (Date.now() >= deadline) {
      if (!isExpired(current)) return current; // still valid for a little while
      throw new ProviderError('timeout', `refresh of the ${provider} token by another replica did not finish in time`);
    }
  }
}

/** Holding the lock: re-read (another replica may have just finished), then refresh and store. */
async function refreshHolding(
  deps: UsableTokenDeps,
  userKey: string,
  provider: string,
  endpoints: EndpointsSource,
  seenBefore: ProviderTokens,
  skew: number,
  request: ProviderRequestOptions | undefined,
): Promise<ProviderTokens | undefined> {
  const stored = await deps.vault.get(userKey, provider);
  if (!stored) return undefined;
  if (!needsRefresh(stored, skew)) return stored;
  // Replaced since we looked (another replica refreshed, or the user re-linked): use it.
  if (stored.accessToken !== seenBefore.accessToken && !isExpired(stored)) return stored;
  if (!stored.refreshToken) {
    if (!isExpired(stored)) return stored;
    await deps.vault.delete(userKey, provider);
    return undefined;
  }
  let fresh: ProviderTokens;
  try {
    const resolved = typeof endpoints === 'function' ? await endpoints(stored) : endpoints;
    const options = request ?? ('request' in resolved ? (resolved.request as ProviderRequestOptions | undefined) : undefined);
    // A link with a DPoP key proves it at the refresh too (RFC 9449 §5: its refresh token may be bound to it).
    fresh = await refreshTokens(resolved, stored.refreshToken, stored.dpopKey ? { ...options, dpop: await dpopKey(stored.dpopKey) } : options);
  } catch (err) {
    if (err instanceof ProviderError && err.kind === 'oauth' && err.oauthError === 'invalid_grant') {
      deps.onRefresh?.('invalid_grant');
      deps.log?.warn({ provider, oauthError: err.oauthError }, 'third-party refresh token rejected; the account must be linked again');
      // Delete only what was rejected: the user may have re-linked meanwhile.
      const now = await deps.vault.get(userKey, provider);
      if (now && now.refreshToken === stored.refreshToken) await deps.vault.delete(userKey, provider);
      return now && now.refreshToken !== stored.refreshToken ? now : undefined;
    }
    deps.onRefresh?.('error');
    deps.log?.warn(
      { provider, kind: err instanceof ProviderError ? err.kind : 'internal', oauthError: err instanceof ProviderError ? err.oauthError : undefined },
      'third-party token refresh failed; stored tokens kept',
    );
    throw err;
  }
  const merged: ProviderTokens = { ...fresh, scope: fresh.scope ?? stored.scope, issuer: stored.issuer, dpopKey: stored.dpopKey };
  if (merged.scope === undefined) delete merged.scope;
  if (merged.issuer === undefined) delete merged.issuer;
  if (merged.dpopKey === undefined) delete merged.dpopKey;
  await deps.vault.put(userKey, provider, merged);
  deps.onRefresh?.('ok');
  return merged;
}

/**
 * Deletes the lock only if it is still ours. Read-compare-delete is two round trips: if
 * the lock expired between them and another replica took it, we would delete theirs. That
 * needs a refresh that outlived the lock TTL (30 s against a 10 s provider timeout); the
 * consequence is at most one extra refresh. A store-level compare-and-delete (one Lua
 * script) would close the window.
 */
async function releaseLock(store: StateStore, key: string, id: string): Promise<void> {
  await store.deleteValueIf(key, id);
}

function needsRefresh(t: ProviderTokens, skewMs: number): boolean {
  return t.expiresAt !== undefined && t.expiresAt - Date.now() <= skewMs;
}

function isExpired(t: ProviderTokens): boolean {
  return t.expiresAt !== undefined && t.expiresAt <= Date.now();
}
