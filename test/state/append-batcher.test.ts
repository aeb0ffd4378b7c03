/**
 * The replay-log append batcher (src/state/append-batcher.ts): appends made in one turn of
 * the event loop share one call, calls are capped by streams and entries, each caller learns
 * the outcome of the call that carried its append, and a later turn makes a new call.
 * (The Redis script itself is covered by the store contract, test/state/store-contract.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppendBatcher, MAX_ENTRIES_PER_CALL, MAX_STREAMS_PER_CALL, type AppendItem } from '../../src/state/append-batcher.js';

/** A stream's append as the batcher sees it (the Redis store adds its keys and bounds). */
interface Item extends AppendItem {
  key: string;
}

const item = (key: string, entries = 1): Item => ({ key, entries: Array.from({ length: entries }, (_, i) => `${key}-${i}`) });

describe('AppendBatcher', () => {
  test('appends of one turn go out in one call, in order; the next turn makes another', async () => {
    const calls: string[][] = [];
    const batcher = new AppendBatcher<Item>(async (items) => calls.push(items.map((i) => i.key)));
    await Promise.all([batcher.append(item('a')), batcher.append(item('b')), batcher.append(item('c'))]);
    assert.deepEqual(calls, [['a', 'b', 'c']]);
    await batcher.append(item('d'));
    assert.deepEqual(calls, [['a', 'b', 'c'], ['d']]);
  });

  test('with groupOf (a Redis Cluster slot) a call carries one group only, each group in order', async () => {
    const calls: string[][] = [];
    const batcher = new AppendBatcher<Item>(async (items) => calls.push(items.map((i) => i.key)), (i) => (i.key.startsWith('u1') ? 1 : 2));
    await Promise.all(['u1-a', 'u2-a', 'u1-b', 'u2-b', 'u1-c'].map((key) => batcher.append(item(key))));
    assert.deepEqual(calls, [
      ['u1-a', 'u1-b', 'u1-c'],
      ['u2-a', 'u2-b'],
    ]);
  });

  test('a call carries at most MAX_STREAMS_PER_CALL streams and MAX_ENTRIES_PER_CALL entries (a bigger single append goes alone)', async () => {
    const calls: Item[][] = [];
    const batcher = new AppendBatcher<Item>(async (items) => calls.push(items));
    const many = Array.from({ length: MAX_STREAMS_PER_CALL + 1 }, (_, i) => batcher.append(item(`s${i}`)));
    await Promise.all(many);
    assert.deepEqual(calls.map((c) => c.length), [MAX_STREAMS_PER_CALL, 1]);

    calls.length = 0;
    await Promise.all([batcher.append(item('big', MAX_ENTRIES_PER_CALL + 5)), batcher.append(item('x', MAX_ENTRIES_PER_CALL - 1)), batcher.append(item('y', 1)), batcher.append(item('z', 1))]);
    assert.deepEqual(calls.map((c) => c.map((i) => i.key)), [['big'], ['x', 'y'], ['z']]);
    assert.ok(calls.every((c) => c.length === 1 || c.reduce((n, i) => n + i.entries.length, 0) <= MAX_ENTRIES_PER_CALL));
  });

  test('each append learns the outcome of its own call: a failed call rejects only its appends', async () => {
    let call = 0;
    const batcher = new AppendBatcher<Item>(async (items) => {
      call++;
      if (items.some((i) => i.key.startsWith('bad'))) throw new Error(`call ${call} failed`);
    });
    const failing = Array.from({ length: MAX_STREAMS_PER_CALL }, (_, i) => batcher.append(item(i === 0 ? 'bad' : `f${i}`)));
    const succeeding = batcher.append(item('good'));
    const outcomes = await Promise.allSettled([...failing, succeeding]);
    assert.ok(outcomes.slice(0, -1).every((o) => o.status === 'rejected' && /call 1 failed/.test(String(o.reason))));
    assert.equal(outcomes.at(-1)!.status, 'fulfilled');
  });

  test('a send that throws at once rejects its appends instead of escaping', async () => {
    const batcher = new AppendBatcher<Item>(() => {
      throw new Error('not connected');
    });
    await assert.rejects(batcher.append(item('a')), /not connected/);
  });
});
