/**
 * src/policy/by-request-id.ts: the values of one POST's requests by JSON-RPC id (the audit's
 * records and the CLIENT spans waiting for their responses). Ids are told apart by type and
 * value, as JSON-RPC has them: `1` and `"1"` are two requests of a 2025-03-26 batch.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ByRequestId } from '../../src/policy/by-request-id.js';

test('a batch with ids 1, "1" and 2: each value is found by its own id only, once', () => {
  const held = new ByRequestId<string>();
  held.hold(1, 'one');
  held.hold('1', 'string one');
  held.hold(2, 'two');
  assert.equal(held.firstHeld, 'one');
  assert.equal(held.take('1'), 'string one');
  assert.equal(held.take('1'), undefined, 'taken once');
  assert.equal(held.take(3), undefined);
  assert.equal(held.take(1), 'one');
  assert.ok(held.holding, '2 still waits');
  assert.equal(held.take(2), 'two');
  assert.equal(held.holding, false);
});

test('a later request of the same id takes the earlier one’s place, as in a map', () => {
  const held = new ByRequestId<string>();
  held.hold('a', 'first');
  held.hold(7, 'seven');
  held.hold(7, 'seven again');
  held.hold('a', 'first again');
  const seen: string[] = [];
  held.forEachHeld((v, into: string[]) => into.push(v), seen);
  assert.deepEqual(seen, ['first again', 'seven again']);
});

test('release finds a value by itself and its id, and only while it is held', () => {
  const held = new ByRequestId<string>();
  held.hold(1, 'one');
  held.hold('1', 'string one');
  assert.equal(held.release('string one', 1), false, 'not under the number 1');
  assert.equal(held.release('string one', '1'), true);
  assert.equal(held.release('string one', '1'), false, 'released once');
  assert.equal(held.release('one', 1), true);
  assert.equal(held.holding, false);
});
