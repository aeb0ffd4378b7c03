/**
 * TTLs as Redis takes them. `SET … PX`, `PEXPIRE`, `GETEX … PX` take a whole number of
 * milliseconds above 0: Redis answers `2499.5` with "ERR value is not an integer or out of
 * range" and `0` or `-5` with "invalid expire time", errors that surface far from their
 * cause (issue 45 §2: an exchanged token whose reuse margin was half an odd lifetime failed
 * the user's call as "the gateway's state store is unavailable"). Callers compute TTLs from
 * clocks and lifetimes, so fractions happen; the store passes every TTL it sends — values,
 * sessions, replay logs, leases, mailboxes, rate-limit windows — through {@link wholeMs}
 * once, at its boundary, and the memory store does the same so that both refuse alike.
 */

/** A TTL that cannot mean anything (NaN, ±Infinity, 0 or below, or too large to be exact). */
export class InvalidTtlError extends RangeError {
  constructor(
    readonly what: string,
    readonly ttlMs: unknown,
  ) {
    super(`${what}: a TTL must be a finite number of milliseconds above 0, not ${String(ttlMs)}; nothing was stored`);
    this.name = 'InvalidTtlError';
  }
}

/**
 * `ttlMs` as whole milliseconds, rounded UP. Up, because a key must never go sooner than its
 * caller asked (a lock released early lets a second holder in) and because a positive
 * fraction below 1 ms must not become 0, which Redis refuses; the extra fraction of a
 * millisecond costs nothing, as callers that care about the exact end (the exchange cache's
 * `reuseUntil`, an elicitation's `expiresAt`) check it themselves when they read.
 *
 * Throws {@link InvalidTtlError} — before anything is sent — for NaN, ±Infinity, 0, negatives
 * and values beyond `Number.MAX_SAFE_INTEGER`: a caller's bug, named with `what`, rather than
 * a key stored forever, deleted at once, or a Redis error mistaken for an outage.
 */
export function wholeMs(ttlMs: number, what: string): number {
  if (typeof ttlMs !== 'number' || !(ttlMs > 0)) throw new InvalidTtlError(what, ttlMs);
  const whole = Math.ceil(ttlMs);
  if (!Number.isSafeInteger(whole)) throw new InvalidTtlError(what, ttlMs);
  return whole;
}
