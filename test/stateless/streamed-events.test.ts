/**
 * The relays of a 2026-07-28 answer that is a stream (issue 29): `sseAnswerAsEvents`
 * (src/stateless/sse-events.ts) and `jsonMessagesAsEvents` (json-lines-events.ts). Every body
 * is fed whole, byte by byte and in odd chunks; what a client reads (the wire's own SSE parser)
 * must be the same each time: held messages shaped whole, a response with a result streamed
 * with `resultType` written in where it closes, ids, comments and priming events dropped.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { jsonMessagesAsEvents } from '../../src/stateless/json-lines-events.js';
import { sseAnswerAsEvents } from '../../src/stateless/sse-events.js';
import { createSseReader } from '../../src/wire/sse.js';
import { MessageTooLargeError } from '../../src/wire/json-lines.js';

/** Marks a held message as shaped, so the test tells held from streamed. */
const shape = (text: string) => JSON.stringify({ ...(JSON.parse(text) as object), shaped: true });

async function* chunked(body: string, size: number): AsyncGenerator<Buffer> {
  const bytes = Buffer.from(body);
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

type Relay = (chunks: AsyncIterable<Buffer>) => AsyncIterable<Buffer>;

/** The events a client reads, the same whatever the chunking. */
async function eventsOf(relay: Relay, body: string): Promise<string[]> {
  const runs: string[][] = [];
  for (const size of [body.length, 1, 5, 64]) {
    const events: string[] = [];
    const reader = createSseReader({ onEvent: (data) => events.push(data) });
    for await (const out of relay(chunked(body, size))) reader.feed(out);
    runs.push(events);
  }
  for (const run of runs.slice(1)) assert.deepEqual(run, runs[0]);
  return runs[0]!;
}

const sse: Relay = (chunks) => sseAnswerAsEvents(chunks, shape, true);
const lines: Relay = (chunks) => jsonMessagesAsEvents(chunks, { shape, streamResults: true });
const progress = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}';
const typed = (id: number) => `{"jsonrpc":"2.0","id":${id},"result":{"content":[{"type":"text","text":"a é {}"}],"resultType":"complete"}}`;

describe('an SSE answer', () => {
  test('progress is held and shaped, the response streamed with resultType added; ids, comments, priming events dropped', async () => {
    const body = `id: 1\ndata: \n\n: keep-alive\n\nevent: message\nid: 2\ndata: ${progress}\n\nid: 3\ndata: {"jsonrpc":"2.0","id":7,"result":{"content":[]}}\n\n`;
    assert.deepEqual(await eventsOf(sse, body), [shape(progress), '{"jsonrpc":"2.0","id":7,"result":{"content":[],"resultType":"complete"}}']);
  });

  test('data on several lines, CRLF and lone CR breaks, no space after the colon: the same data, the same JSON', async () => {
    const body = `data:{"jsonrpc":"2.0",\r\ndata: "id":8,\rdata: "result":{"a":1}}\r\n\r\n`;
    const [event] = await eventsOf(sse, body);
    assert.deepEqual(JSON.parse(event!), { jsonrpc: '2.0', id: 8, result: { a: 1, resultType: 'complete' } });
    assert.equal(event, '{"jsonrpc":"2.0",\n"id":8,\n"result":{"a":1,"resultType":"complete"}}');
  });

  test('a response that names its type passes as sent; an error is held', async () => {
    const error = '{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"x"}}';
    assert.deepEqual(await eventsOf(sse, `data: ${typed(9)}\n\ndata: ${error}\n\n`), [typed(9), shape(error)]);
  });

  test('an event the body leaves unended is not dispatched, streamed or held', async () => {
    assert.deepEqual(await eventsOf(sse, `data: ${progress}\n\ndata: {"jsonrpc":"2.0","id":1,"result":{"a":`), [shape(progress)]);
    assert.deepEqual(await eventsOf(sse, `data: ${progress}`), []);
  });

  test('with streaming off (a cacheable method), the response is held and shaped too', async () => {
    const held: Relay = (chunks) => sseAnswerAsEvents(chunks, shape, false);
    assert.deepEqual(await eventsOf(held, `data: ${typed(3)}\n\n`), [shape(typed(3))]);
  });
});

describe('JSON lines', () => {
  test('a notification, then the response streamed; then another message', async () => {
    const body = `${progress}\n{"jsonrpc":"2.0","id":4,"result":{}}\n${progress}\n`;
    assert.deepEqual(await eventsOf(lines, body), [shape(progress), '{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete"}}', shape(progress)]);
  });

  test('a pretty-printed response streams as several data lines, read back as the same JSON', async () => {
    const pretty = JSON.stringify({ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'x' }] } }, null, 2);
    const [event] = await eventsOf(lines, pretty);
    assert.deepEqual(JSON.parse(event!), { jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'x' }], resultType: 'complete' } });
  });

  test('a held value cut short goes as it is; a streamed one is left unended', async () => {
    assert.deepEqual(await eventsOf((c) => jsonMessagesAsEvents(c, { shape: (t) => t, streamResults: true }), '{"jsonrpc":"2.0","method":"x"'), ['{"jsonrpc":"2.0","method":"x"']);
    assert.deepEqual(await eventsOf(lines, '{"jsonrpc":"2.0","id":1,"result":{"a":'), []);
  });
});

describe('bounds', () => {
  const MIB = 1024 * 1024;
  const drain = async (relay: Relay, body: string) => {
    let bytes = 0;
    for await (const out of relay(chunked(body, 64 * 1024))) bytes += out.length;
    return bytes;
  };
  // Past MAX_MESSAGE_BYTES (16 MiB, backends/backend-messages.ts) a held message ends the relay.
  const hugeNotification = `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"${'x'.repeat(17 * MIB)}"}}`;
  const hugeResult = `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"${'y'.repeat(17 * MIB)}"}]}}`;

  test('a held message past 16 MiB ends the relay with MessageTooLargeError, in JSON lines and SSE alike', async () => {
    await assert.rejects(drain(lines, hugeNotification), MessageTooLargeError);
    await assert.rejects(drain(sse, `data: ${hugeNotification}\n\n`), MessageTooLargeError);
  });

  test('a streamed result holds nothing, so it passes whatever its size', async () => {
    assert.ok((await drain(lines, hugeResult)) > 17 * MIB);
    assert.ok((await drain(sse, `data: ${hugeResult}\n\n`)) > 17 * MIB);
  });
});
