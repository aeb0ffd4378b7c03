/**
 * `holdAnswer` (src/backends/held-answer.ts): a body that ends soon and small is read whole; a
 * big one is handed on once past the bound, a slow one once quiet, each without waiting for its
 * end and with nothing lost. Bodies are the gateway's own synthetic bodies (what the aggregated
 * endpoint relays), fed by generators the test releases; the wire is covered by
 * answer-shapes.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { HELD_ANSWER_MAX_BYTES, heldChunks, holdAnswer } from '../../src/backends/held-answer.js';

function gated(): { open: () => void; wait: Promise<void> } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { open, wait };
}

const response = (source: AsyncIterable<Buffer>, headers: Record<string, string> = {}): BackendResponse => ({ status: 200, headers, contentType: 'application/json', body: syntheticBody(source) });

async function collect(chunks: AsyncIterable<Buffer>): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts).toString('utf8');
}

describe('holdAnswer', () => {
  test('a small body that ends at once is read whole, its chunks joined', async () => {
    const held = await holdAnswer(response((async function* () {
      yield Buffer.from('{"jsonrpc":"2.0",');
      yield Buffer.from('"id":1,"result":{}}');
    })()));
    assert.equal(held.whole?.toString('utf8'), '{"jsonrpc":"2.0","id":1,"result":{}}');
  });

  test('a body that does not end within the quiet time is handed on as a stream: what came first, then the rest', async () => {
    const gate = gated();
    const held = await holdAnswer(response((async function* () {
      yield Buffer.from('{"first":1}\n');
      await gate.wait;
      yield Buffer.from('{"second":2}\n');
    })()), 5);
    assert.equal(held.whole, undefined, 'not held to its end');
    gate.open();
    assert.equal(await collect(heldChunks(held)), '{"first":1}\n{"second":2}\n');
  });

  test('a body with nothing yet is handed on once quiet too (an open listen that has not spoken)', async () => {
    const gate = gated();
    const held = await holdAnswer(response((async function* () {
      await gate.wait;
      yield Buffer.from('late');
    })()), 5);
    assert.ok(held.stream);
    gate.open();
    assert.equal(await collect(held.stream), 'late');
  });

  test('a body past the bound is handed on without waiting for its end', async () => {
    const gate = gated();
    const big = Buffer.alloc(HELD_ANSWER_MAX_BYTES + 1, 0x61);
    const held = await holdAnswer(response((async function* () {
      yield big;
      await gate.wait;
      yield Buffer.from('end');
    })()), 60_000);
    assert.ok(held.stream, 'streamed before the end came (the quiet time is a minute)');
    gate.open();
    assert.equal((await collect(held.stream)).length, big.length + 3);
  });

  test('a declared length up to 1 MiB is read whole; a bigger one is streamed from the start', async () => {
    const small = await holdAnswer(response((async function* () {
      yield Buffer.from('{}');
    })(), { 'content-length': '2' }));
    assert.equal(small.whole?.toString('utf8'), '{}');
    const large = await holdAnswer(response((async function* () {
      yield Buffer.from('x');
    })(), { 'content-length': String(2 * 1024 * 1024) }));
    assert.ok(large.stream);
    assert.equal(await collect(large.stream), 'x');
  });
});
