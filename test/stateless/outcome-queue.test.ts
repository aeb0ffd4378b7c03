/**
 * The pieces of a handed-over attempt (src/stateless/outcome-queue.ts): given out in their
 * numbered order whatever order they arrive in, a missing one awaited only so long, and a
 * piece without a number (an earlier release's whole outcome) taken as the next.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { OutcomeQueue } from '../../src/stateless/outcome-queue.js';

describe('OutcomeQueue', () => {
  it('gives the pieces out in order, waiting for one that arrives late', async () => {
    const queue = new OutcomeQueue();
    queue.put({ seq: 1, messages: ['b'], more: true });
    setTimeout(() => queue.put({ seq: 0, messages: ['a'], more: true }), 20);
    queue.put({ seq: 2, messages: ['c'], more: false });
    const order: string[] = [];
    for (let piece = await queue.next(1000); piece; piece = piece.more ? await queue.next(1000) : undefined) order.push(...(piece.messages ?? []));
    assert.deepEqual(order, ['a', 'b', 'c']);
  });

  it('a piece that never comes ends the wait after the time given', async () => {
    const queue = new OutcomeQueue();
    queue.put({ seq: 1, messages: ['b'] });
    const started = Date.now();
    assert.equal(await queue.next(60), undefined);
    assert.ok(Date.now() - started >= 50);
  });

  it('a piece without a number is the next one', async () => {
    const queue = new OutcomeQueue();
    queue.put({ messages: ['x', 'y'], status: 200 });
    assert.deepEqual((await queue.next(100))?.messages, ['x', 'y']);
  });
});
