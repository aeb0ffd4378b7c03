/**
 * The in-process rate-limit store (src/state/rate-limit-store.ts): counts per key in fixed
 * windows, answers before `incr` returns, starts a new window when the old one ended, and
 * keeps at most `maxKeys` users (least recently seen dropped first).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LocalRateLimitStore, type RateLimitCount } from '../../src/state/rate-limit-store.js';

function hit(store: LocalRateLimitStore, key: string, windowMs: number): RateLimitCount {
  let answer: RateLimitCount | undefined;
  store.incr(key, (error, count) => {
    assert.equal(error, null);
    answer = count;
  }, windowMs, 10);
  assert.ok(answer, 'answered before incr returned');
  return answer;
}

describe('LocalRateLimitStore', () => {
  test('counts each key on its own within a window, with the time left', () => {
    const store = new LocalRateLimitStore();
    assert.equal(hit(store, 'alice', 60_000).current, 1);
    assert.equal(hit(store, 'alice', 60_000).current, 2);
    const bob = hit(store, 'bob', 60_000);
    assert.equal(bob.current, 1);
    assert.ok(bob.ttl > 59_000 && bob.ttl <= 60_000, `ttl ${bob.ttl}`);
  });

  test('a request after the window ended starts a new one at 1', async () => {
    const store = new LocalRateLimitStore();
    hit(store, 'alice', 30);
    hit(store, 'alice', 30);
    await new Promise((r) => setTimeout(r, 40));
    const fresh = hit(store, 'alice', 30);
    assert.equal(fresh.current, 1);
    assert.ok(fresh.ttl > 0 && fresh.ttl <= 30);
  });

  test('at most maxKeys users; the least recently seen is dropped first', () => {
    const store = new LocalRateLimitStore(2);
    hit(store, 'a', 60_000);
    hit(store, 'b', 60_000);
    hit(store, 'a', 60_000); // a is now the most recent
    hit(store, 'c', 60_000); // drops b
    assert.equal(store.size, 2);
    assert.equal(hit(store, 'a', 60_000).current, 3, 'a kept its count');
    assert.equal(hit(store, 'b', 60_000).current, 1, 'b started again');
  });
});
