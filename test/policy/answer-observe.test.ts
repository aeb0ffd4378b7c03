/**
 * An answer watched by several observers is read once (src/policy/answer-observe.ts, issue 44
 * part 1): the audit's observer joins the CLIENT span's watch of the same response — one tap,
 * one scan — and gets every message the first one gets; a response a face rewrote in between
 * is watched anew; a watch that only scans is not joined by an observer that wants whole messages.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { observedAnswer } from '../../src/policy/answer-observe.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

const ANSWER = '{"result":{"content":[{"type":"text","text":"{\\"error\\":{\\"code\\":1}}"}],"isError":true},"jsonrpc":"2.0","id":7}';

function jsonAnswer(): BackendResponse {
  return { status: 200, headers: { 'content-length': String(ANSWER.length) }, contentType: 'application/json', body: syntheticBody(ANSWER) };
}

function sseAnswer(): BackendResponse {
  const progress = '{"method":"notifications/progress","params":{"progressToken":0,"progress":1},"jsonrpc":"2.0"}';
  return { status: 200, headers: {}, contentType: 'text/event-stream', body: syntheticBody(`event: message\ndata: ${progress}\n\nevent: message\ndata: ${ANSWER}\n\n`) };
}

/** An observer that keeps what it saw. */
function watcher(whole = false) {
  const seen: JsonRpcMessage[] = [];
  let settled = 0;
  return { seen, settledCount: () => settled, observer: { observe: (m: JsonRpcMessage) => void seen.push(m), whole, settled: () => void settled++ } };
}

test('a second observer joins the first one\'s watch: the same response, one read, both told each message once', async () => {
  const span = watcher();
  const audit = watcher();
  const once = observedAnswer(jsonAnswer(), span.observer);
  const twice = observedAnswer(once, audit.observer);
  assert.equal(twice, once, 'joined, not wrapped again');
  assert.equal(await twice.body.text(), ANSWER, 'the answer passes as the backend sent it');
  for (const w of [span, audit]) {
    assert.equal(w.seen.length, 1);
    assert.equal(w.seen[0]!.id, 7);
    assert.deepEqual(w.seen[0]!.result, { isError: true }, 'scanned: the outcome, not the quoted error in the text');
    assert.equal(w.settledCount(), 1);
  }
  assert.equal(twice.headers['content-length'], String(ANSWER.length), 'the length kept (one write)');
});

test('SSE: both observers see each message of the stream once', async () => {
  const span = watcher();
  const audit = watcher();
  const res = observedAnswer(observedAnswer(sseAnswer(), span.observer), audit.observer);
  const text = await res.body.text();
  assert.match(text, /"id":7/);
  for (const w of [span, audit]) {
    assert.deepEqual(w.seen.map((m) => m.method ?? m.id), ['notifications/progress', 7]);
    assert.equal(w.settledCount(), 1);
  }
});

test('a response rewritten between the two (a copy) is watched anew, and each observer still sees it', async () => {
  const span = watcher();
  const audit = watcher();
  const inner = observedAnswer(jsonAnswer(), span.observer);
  const rewritten: BackendResponse = { ...inner, headers: { ...inner.headers } };
  const outer = observedAnswer(rewritten, audit.observer);
  assert.notEqual(outer, rewritten, 'the copy does not carry the first watch');
  await outer.body.text();
  assert.equal(span.seen.length, 1);
  assert.equal(audit.seen.length, 1);
});

test('an observer that wants whole messages does not join a watch that only scans', async () => {
  const audit = watcher();
  const content = watcher(true);
  const first = observedAnswer(jsonAnswer(), audit.observer);
  const second = observedAnswer(first, content.observer);
  assert.notEqual(second, first);
  await second.body.text();
  assert.deepEqual(content.seen[0]!.result, { content: [{ type: 'text', text: '{"error":{"code":1}}' }], isError: true }, 'parsed whole');
  assert.deepEqual(audit.seen[0]!.result, { isError: true });
});

test('a watched response has the backend\'s fields as they were: refused only when it was there, the headers the same', () => {
  const plain = observedAnswer(jsonAnswer(), watcher().observer);
  assert.deepEqual(Object.keys(plain), ['status', 'headers', 'contentType', 'body']);
  assert.equal('refused' in plain, false);
  const refused = observedAnswer({ ...jsonAnswer(), refused: true }, watcher().observer);
  assert.equal(refused.refused, true);
  assert.equal(refused.headers['content-length'], String(ANSWER.length));
});
