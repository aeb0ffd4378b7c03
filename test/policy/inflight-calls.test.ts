/**
 * src/policy/inflight-calls.ts: the audited calls in flight by session and request id, which a
 * client's `notifications/cancelled` ends (issue 44 part 1: one call held as itself, a map only
 * from a session's second call on). It must answer as a map of maps would.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InflightCalls } from '../../src/policy/inflight-calls.js';
import type { JsonRpcId } from '../../src/wire/jsonrpc.js';

type Call = { id: JsonRpcId; n: number };
const call = (id: JsonRpcId, n: number): Call => ({ id, n });
/** The model's key of an id: its type and value, as `idKey` (answer-edit.ts) writes it. */
const keyOf = (id: JsonRpcId) => `${typeof id}:${id}`;

test('one call and several, in two sessions: each found by its own session and id only', () => {
  const calls = new InflightCalls<Call>();
  const a1 = call(1, 1);
  calls.add('s-a', a1.id, a1);
  assert.equal(calls.get('s-a', 1), a1);
  assert.equal(calls.get('s-a', '1'), undefined, 'the id\'s type is part of its key');
  assert.equal(calls.get('s-b', 1), undefined, 'another session\'s call of the same id is not this one');
  const a2 = call(2, 2);
  const b1 = call(1, 3);
  calls.add('s-a', a2.id, a2);
  calls.add('s-b', b1.id, b1);
  assert.equal(calls.get('s-a', 1), a1);
  assert.equal(calls.get('s-a', 2), a2);
  assert.equal(calls.get('s-b', 1), b1);
  for (const [session, c] of [['s-a', a1], ['s-a', a2], ['s-b', b1]] as const) calls.delete(session, c.id, c);
  assert.equal(calls.sessions, 0, 'nothing is held once every call is settled');
});

test('a later call of the same id takes the earlier one\'s place; settling the earlier one then forgets nothing', () => {
  for (const others of [0, 1]) {
    const calls = new InflightCalls<Call>();
    if (others) calls.add('s', 9, call(9, 9));
    const first = call(1, 1);
    const later = call(1, 2);
    calls.add('s', first.id, first);
    calls.add('s', later.id, later);
    assert.equal(calls.get('s', 1), later);
    calls.delete('s', first.id, first);
    assert.equal(calls.get('s', 1), later, `with ${others} other call(s) in flight`);
    calls.delete('s', later.id, later);
    assert.equal(calls.get('s', 1), undefined);
    assert.equal(calls.sessions, others, 'the session stays only while it has calls in flight');
  }
});

test('against a map of maps, over a random run of adds and settles', () => {
  const calls = new InflightCalls<Call>();
  const model = new Map<string, Map<string, Call>>();
  let seed = 7;
  const next = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
  const held: Array<[string, Call]> = [];
  for (let i = 0; i < 5_000; i++) {
    const session = `s${next(4)}`;
    if (next(3) > 0 || !held.length) {
      // Numbers and strings of the same digits: two ids.
      const c = call(next(2) ? next(5) : String(next(5)), i);
      calls.add(session, c.id, c);
      let m = model.get(session);
      if (!m) model.set(session, (m = new Map()));
      m.set(keyOf(c.id), c);
      held.push([session, c]);
    } else {
      const [s, c] = held.splice(next(held.length), 1)[0]!;
      calls.delete(s, c.id, c);
      const m = model.get(s);
      if (m?.get(keyOf(c.id)) === c) m.delete(keyOf(c.id));
      if (m?.size === 0) model.delete(s);
    }
    assert.equal(calls.sessions, model.size, `step ${i}: sessions held`);
    for (const s of ['s0', 's1', 's2', 's3']) {
      for (let n = 0; n < 5; n++) for (const id of [n, String(n)]) assert.equal(calls.get(s, id), model.get(s)?.get(keyOf(id)), `step ${i}`);
    }
  }
});
