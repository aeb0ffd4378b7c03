/**
 * An SSE answer watched for its messages passes as the backend sent it (src/backends/sse-tapped-body.ts,
 * issue 44 part 1): read whole, the same bytes and the length kept, the events read from them;
 * iterated, the same chunks, each event told before the chunk that completes it goes on, also
 * when a chunk ends inside an event or inside a UTF-8 character; dropped, the source is let go
 * at once and `settled` told once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody, type BackendBody } from '../../src/backends/body.js';
import { sseTappedBody } from '../../src/backends/sse-tapped-body.js';
import { observedAnswer } from '../../src/policy/answer-observe.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

const PROGRESS = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"message":"café ☕"}}';
const RESULT = '{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"naïve"}]}}';
/** As an SDK server writes it: a priming event (id, no data), progress, the result; `event:` lines and a retry field. */
const STREAM = `id: p0\nretry: 1000\ndata:\n\nevent: message\nid: e1\ndata: ${PROGRESS}\n\nevent: message\nid: e2\ndata: ${RESULT}\n\n`;

/** A body whose chunks are the stream's bytes cut at `cuts` (byte offsets), and whether it was destroyed. */
function chunkedBody(cuts: number[]): { body: BackendBody; chunks: Buffer[]; destroyed: () => boolean } {
  const bytes = Buffer.from(STREAM);
  const bounds = [0, ...cuts, bytes.length];
  const chunks = bounds.slice(1).map((end, i) => bytes.subarray(bounds[i]!, end));
  let destroyed = false;
  const inner = syntheticBody(
    (async function* () {
      for (const c of chunks) yield c;
    })(),
  );
  const destroy = inner.destroy.bind(inner);
  inner.destroy = () => {
    destroyed = true;
    destroy();
  };
  return { body: inner, chunks, destroyed: () => destroyed };
}

test('read whole: the bytes as they came, each event with data told once, priming event left out, settled once', async () => {
  const told: string[] = [];
  const whole: boolean[] = [];
  let settled = 0;
  const body = sseTappedBody(syntheticBody(STREAM), { onText: (d, w) => void (told.push(d), whole.push(w)), settled: () => void settled++ });
  const text = await body.text();
  assert.equal(text, STREAM, 'not rewritten: event types, ids and retry pass as the backend wrote them');
  assert.deepEqual(told, [PROGRESS, RESULT]);
  assert.deepEqual(whole, [true, true], 'told as events of an answer read whole');
  assert.equal(settled, 1);
});

test('iterated: the same chunks, each event told before the chunk completing it is handed on (cuts inside an event and inside a UTF-8 character)', async () => {
  const cafe = Buffer.from(STREAM).indexOf(Buffer.from('é')) + 1; // between the two bytes of é
  const resultEnd = Buffer.from(STREAM).length - 1; // the blank line that ends the result, alone
  const src = chunkedBody([5, cafe, resultEnd]);
  const log: string[] = [];
  let settled = 0;
  const body = sseTappedBody(src.body, {
    onText: (d, whole) => void log.push(`event ${JSON.parse(d).id ?? JSON.parse(d).method}${whole ? ' (whole)' : ''}`),
    settled: () => void settled++,
  });
  const passed: Buffer[] = [];
  for await (const chunk of body) {
    passed.push(chunk);
    log.push(`chunk ${passed.length}`);
  }
  assert.deepEqual(Buffer.concat(passed), Buffer.from(STREAM));
  assert.equal(passed.length, src.chunks.length, 'no chunk merged or split');
  // Chunk 2 ends inside the é of the progress event: that event is complete only with chunk 3;
  // chunk 3 ends before the result's last line break: the result is complete only with chunk 4.
  assert.deepEqual(log, ['chunk 1', 'chunk 2', 'event notifications/progress', 'chunk 3', 'event 3', 'chunk 4'], 'told as they pass, not as the events of an answer read whole');
  assert.equal(settled, 1);
});

test('dropped after the first chunk: the source is destroyed at once and settled told once', async () => {
  const src = chunkedBody([5, 40]);
  let settled = 0;
  const body = sseTappedBody(src.body, { onText: () => {}, settled: () => void settled++ });
  for await (const _ of body) break;
  assert.equal(settled, 1);
  assert.ok(src.destroyed(), 'the early stop gave the source up');
  body.destroy();
  assert.equal(settled, 1, 'once');
});

test('watched by observedAnswer: the SSE answer keeps its length and bytes, and the observer sees each message', async () => {
  const seen: JsonRpcMessage[] = [];
  const res: BackendResponse = { status: 200, headers: { 'content-length': String(Buffer.byteLength(STREAM)) }, contentType: 'text/event-stream', body: syntheticBody(STREAM) };
  const watched = observedAnswer(res, { observe: (m) => void seen.push(m) });
  assert.equal(watched.headers['content-length'], String(Buffer.byteLength(STREAM)), 'the length kept: the relay reads it whole in one read');
  assert.equal(Buffer.from(await watched.body.bytes()).toString('utf8'), STREAM);
  assert.deepEqual(seen.map((m) => m.method ?? m.id), ['notifications/progress', 3]);
  assert.deepEqual(seen[1]!.result, {}, 'scanned: a result that is no tool error');
});
