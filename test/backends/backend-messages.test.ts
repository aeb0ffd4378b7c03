/**
 * BackendMessages reads a backend's answer by its content type (issue 29): SSE events, or JSON
 * values one after another (JSON lines kept open, or one message), pulled — nothing read while
 * nobody asks — and bounded: a message past the bound ends the read with a clear failure and
 * closes the backend's body, whichever the framing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BackendMessages, type BackendMessage } from '../../src/backends/backend-messages.js';
import type { BackendBody } from '../../src/backends/body.js';

/** A body made of these chunks, then (with `endless`) the last one again and again; counts the chunks taken. */
function chunkedBody(chunks: string[], endless = false): BackendBody & { pulls: number; destroyed: boolean } {
  const body = {
    pulls: 0,
    destroyed: false,
    async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
      for (let i = 0; i < chunks.length || (endless && i < 100_000); i++) {
        if (body.destroyed) return;
        body.pulls++;
        yield Buffer.from(chunks[Math.min(i, chunks.length - 1)]!);
      }
    },
    destroy() {
      body.destroyed = true;
    },
    dump: async () => {},
    text: async () => chunks.join(''),
    bytes: async () => Buffer.from(chunks.join('')),
  };
  return body;
}

async function all(messages: BackendMessages): Promise<BackendMessage[]> {
  const out: BackendMessage[] = [];
  for (let message = await messages.next(); message; message = await messages.next()) out.push(message);
  return out;
}

const progress = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 't', progress: 1, message: 'é ✓ } "' } };
const result = { jsonrpc: '2.0', id: 3, result: { content: [{ type: 'text', text: 'done' }] } };

describe('BackendMessages', () => {
  test('JSON lines come out message by message whatever the chunking, a multi-byte character split included', async () => {
    const bytes = Buffer.from(`${JSON.stringify(progress)}\n${JSON.stringify(result)}\n`);
    for (let cut = 1; cut < bytes.length; cut += 7) {
      const body = chunkedBody([]);
      body[Symbol.asyncIterator] = async function* () {
        yield bytes.subarray(0, cut);
        yield bytes.subarray(cut);
      };
      assert.deepEqual(await all(new BackendMessages(body, 'application/json')), [progress, result], `cut at ${cut}`);
    }
  });

  test('one JSON message without a final newline, and a pretty-printed one, are one message each', async () => {
    assert.deepEqual(await all(new BackendMessages(chunkedBody([JSON.stringify(result)]), 'application/json')), [result]);
    assert.deepEqual(await all(new BackendMessages(chunkedBody([JSON.stringify(result, null, 2)]), 'application/json')), [result]);
  });

  test('SSE answers are read as before', async () => {
    const body = chunkedBody([`id: 1\nretry: 500\ndata: \n\nevent: message\ndata: ${JSON.stringify(progress)}\n\n`, `data: ${JSON.stringify(result)}\n\n`]);
    assert.deepEqual(await all(new BackendMessages(body, 'text/event-stream')), [progress, result]);
  });

  test('pulled: nothing is read before a message is asked for, and no more than the message needs', async () => {
    const body = chunkedBody([`${JSON.stringify(progress)}\n`, `${JSON.stringify(progress)}\n`], true);
    const messages = new BackendMessages(body, 'application/json');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(body.pulls, 0);
    assert.deepEqual(await messages.next(), progress);
    assert.equal(body.pulls, 1);
    messages.close();
    assert.equal(body.destroyed, true);
  });

  for (const [contentType, head, filler] of [
    ['application/json', '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"', 'x'.repeat(1000)],
    ['text/event-stream', 'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"', 'x'.repeat(1000)],
  ] as const) {
    test(`${contentType}: a message past the bound ends the read with a clear failure and closes the body, having read only about the bound`, async () => {
      const before = contentType === 'application/json' ? `${JSON.stringify(progress)}\n` : `data: ${JSON.stringify(progress)}\n\n`;
      const body = chunkedBody([before, head, filler], true);
      const messages = new BackendMessages(body, contentType, 16 * 1024);
      assert.deepEqual(await messages.next(), progress);
      assert.equal(messages.failure, undefined);
      assert.equal(await messages.next(), undefined);
      assert.match(String((messages.failure as Error | undefined)?.message), /longer than 16384 bytes/);
      assert.equal(body.destroyed, true);
      assert.ok(body.pulls <= 20, `read ${body.pulls} chunks of an endless message`);
    });
  }
});
