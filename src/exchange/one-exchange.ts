/**
 * One exchange at a time per user and target across replicas (SPEC §8), as a token refresh
 * is done (connect/usable-token.ts): a lock in the shared store (`lock:exchange:…`, SET NX
 * with a TTL above the exchange timeout). The replica that takes it looks at the cache once
 * more, exchanges, stores the token and lets go; the others poll the cache until a usable
 * token appears, or take the lock over when it is gone without one.
 *
 * A failed exchange leaves a short note beside the lock ({@link FAILURE_NOTE_MS}), written
 * before the lock is let go: the requests that waited for it, and those that come right
 * after, on any replica, get the same error at once instead of asking an endpoint that is
 * down (or with a user token that was just refused) all over again.
 *
 * `rejected`: the token a backend just refused (401). It is never handed out again; it is
 * deleted from the cache (unless already replaced) and a fresh one exchanged.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StateStore } from '../state/store.js';
import type { ExchangeCache } from './exchange-cache.js';
import { ExchangeFailedError, type ExchangedToken, type ExchangeFailure } from './exchange-grant.js';
import { ValueKeys } from '../state/value-keys.js';

/** How long a failure answers for the exchanges that would follow it. */
export const FAILURE_NOTE_MS = 2_000;
const POLL_MS = 50;

export interface OneExchangeOptions {
  /** The token the backend refused, if that is why we are here. */
  rejected?: string;
  /** How long to wait for another replica's exchange (more than its timeout). */
  waitMs: number;
  /** Lock TTL (more than the exchange timeout). */
  lockTtlMs: number;
}

export async function oneExchange(store: StateStore, cache: ExchangeCache, key: string, exchange: () => Promise<ExchangedToken>, options: OneExchangeOptions): Promise<string> {
  const lock: Lock = { key: ValueKeys.exchangeLock(key), id: randomBytes(16).toString('base64url'), noteKey: ValueKeys.exchangeFailure(key) };
  const deadline = Date.now() + options.waitMs;
  const usable = (token: string | undefined) => token !== undefined && token !== options.rejected;
  for (;;) {
    const note = await store.getValue(lock.noteKey);
    if (note !== undefined) throw failureOf(note);
    if (await store.putValueIfAbsent(lock.key, lock.id, options.lockTtlMs)) {
      return exchangeHolding(store, cache, key, lock, exchange, options.rejected);
    }
    while (Date.now() < deadline) {
      const seen = await cache.get(key);
      if (usable(seen?.accessToken)) return seen!.accessToken;
      if ((await store.getValue(lock.key)) === undefined) break; // let go: a token, a failure note, or take it over
      await sleep(POLL_MS);
    }
    if (Date.now() >= deadline) {
      throw new ExchangeFailedError('another replica\'s exchange for this user did not finish in time', { outcome: 'timeout', signInAgain: false });
    }
  }
}

interface Lock {
  key: string;
  /** Ours, so that we never let go of another replica's. */
  id: string;
  /** Where a failure is noted for the requests that follow it. */
  noteKey: string;
}

/** Holding the lock: look once more (another replica may have just stored one), then exchange and store. */
async function exchangeHolding(store: StateStore, cache: ExchangeCache, key: string, lock: Lock, exchange: () => Promise<ExchangedToken>, rejected: string | undefined): Promise<string> {
  try {
    const cached = await cache.get(key);
    if (cached && cached.accessToken !== rejected) return cached.accessToken;
    if (cached) await cache.discard(key, cached);
    const token = await exchange();
    await cache.put(key, token);
    return token.accessToken;
  } catch (err) {
    // Noted before the lock goes, so that no waiter finds neither.
    if (err instanceof ExchangeFailedError) await store.putValue(lock.noteKey, JSON.stringify({ message: err.message, ...err.failure }), FAILURE_NOTE_MS).catch(() => undefined);
    throw err;
  } finally {
    await store.deleteValueIf(lock.key, lock.id).catch(() => undefined);
  }
}

function failureOf(note: string): ExchangeFailedError {
  try {
    const { message, outcome, signInAgain, oauthError } = JSON.parse(note) as ExchangeFailure & { message: string };
    return new ExchangeFailedError(String(message), { outcome, signInAgain: signInAgain === true, ...(oauthError ? { oauthError } : {}) });
  } catch {
    return new ExchangeFailedError('the exchange failed just now', { outcome: 'unavailable', signInAgain: false });
  }
}
