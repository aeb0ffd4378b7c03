/**
 * An observer that acts only on errors is not told a whole answer that cannot hold one
 * (src/policy/outcome-scan.ts `bytesMayHoldError`, src/policy/answer-observe.ts; issue 44 part 1:
 * the scan was half of what metrics only added to a call). What must hold:
 *
 * - no false "cannot": every message whose `error` (top level) or `result.isError` JSON.parse
 *   sees, whatever escapes spell the names, is said to maybe hold one — the names spelled every
 *   way, and random messages;
 * - such an observer is still told every error, and `settled` once; an observer that wants every
 *   message (the audit) makes the watch tell every message to all;
 * - an SSE answer iterated chunk by chunk is told event by event as before: the response ends
 *   its span when it passes, not when the stream ends.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { observedAnswer, type AnswerObserver } from '../../src/policy/answer-observe.js';
import { bytesMayHoldError, textMayHoldError } from '../../src/policy/outcome-scan.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

/** Both checks of a message's text: the bytes (a JSON answer) and the string (an SSE event). */
function mayHold(text: string): boolean {
  const bytes = bytesMayHoldError(Buffer.from(text, 'utf8'));
  assert.equal(textMayHoldError(text), bytes, `the two checks agree on ${text}`);
  return bytes;
}

/** Whether JSON.parse sees an error outcome in the text: what the CLIENT span would record. */
function holdsError(text: string): boolean {
  const m = JSON.parse(text) as JsonRpcMessage;
  return Boolean(m.error) || (m.result as { isError?: unknown } | undefined)?.isError === true;
}

/** Each way to write `name` in JSON: every subset of its letters as `\u00XX` (lower- and upper-case hex). */
function spellings(name: string): string[] {
  const out: string[] = [];
  for (let mask = 0; mask < 1 << name.length; mask++) {
    for (const upper of [false, true]) {
      let spelled = '';
      for (let k = 0; k < name.length; k++) {
        const hex = name.charCodeAt(k).toString(16).padStart(4, '0');
        spelled += mask & (1 << k) ? `\\u${upper ? hex.toUpperCase() : hex}` : name[k];
      }
      out.push(spelled);
    }
  }
  return out;
}

/** The benchmarks' answer (bench/micro-cases.ts): a tool's JSON quoted in its text, an error among the quoted names. */
const PLAIN_ANSWER = JSON.stringify({ result: { content: [{ type: 'text', text: JSON.stringify({ error: 'none', message: 'hello' }) }], _meta: { 'io.example/errors': 0 } }, jsonrpc: '2.0', id: 7 });

describe('whether a message can hold an error', () => {
  it('says maybe for `error` and `isError` spelled every way JSON allows', () => {
    let cases = 0;
    for (const name of spellings('error')) {
      const text = `{"jsonrpc":"2.0","id":1,"${name}":{"code":-32602,"message":"bad"}}`;
      assert.ok(holdsError(text), `JSON.parse reads an error in ${text}`);
      assert.ok(mayHold(text), text);
      cases++;
    }
    for (const name of spellings('isError')) {
      const text = `{"jsonrpc":"2.0","id":1,"result":{"content":[],"${name}":true}}`;
      assert.ok(holdsError(text), `JSON.parse reads isError in ${text}`);
      assert.ok(mayHold(text), text);
      cases++;
    }
    assert.equal(cases, 2 * (1 << 5) + 2 * (1 << 7));
  });

  it('says cannot for a plain answer, a quoted error in a tool\'s text included', () => {
    assert.equal(holdsError(PLAIN_ANSWER), false);
    assert.equal(mayHold(PLAIN_ANSWER), false);
    assert.equal(mayHold('{"jsonrpc":"2.0","id":2,"result":{}}'), false);
    assert.equal(mayHold('not json at all'), false, 'text that is no message holds no outcome either');
    // A false maybe only costs the scan.
    assert.equal(mayHold('{"jsonrpc":"2.0","id":2,"result":{"mirror":1}}'), true);
  });

  it('never says cannot where JSON.parse sees an error: 3,000 random messages', () => {
    // A fixed generator, so a failure can be replayed.
    let seed = 0x2f6b_1d3a;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) >>> 0) / 2 ** 32);
    const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
    const names = [...spellings('error').slice(0, 12), ...spellings('isError').slice(0, 12), 'result', 'id', 'mirror', 'errors', 'Error', 'text', 'content'];
    const values = ['true', 'false', '1', '"x"', '{"code":-1}', '{}', '[]', 'null', '"\\"error\\": 1"'];
    const member = (): string => `"${pick(names)}":${random() < 0.3 ? `{${Array.from({ length: 1 + Math.floor(random() * 3) }, member).join(',')}}` : pick(values)}`;
    let withError = 0;
    for (let n = 0; n < 3000; n++) {
      const text = `{"jsonrpc":"2.0","id":${n},${Array.from({ length: 1 + Math.floor(random() * 4) }, member).join(',')}}`;
      if (!holdsError(text)) continue;
      withError++;
      assert.ok(mayHold(text), text);
    }
    assert.ok(withError > 300, `enough of them hold an error (${withError})`);
  });
});

/** An observer that keeps what it was told. */
function watcher(errorsOnly: boolean) {
  const seen: Array<JsonRpcMessage['id'] | string> = [];
  let settled = 0;
  const observer: AnswerObserver = { observe: (m) => void seen.push(m.method ?? m.id), errorsOnly, settled: () => void settled++ };
  return { seen, settled: () => settled, observer };
}

const OK = '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}';
const FAILED = '{"jsonrpc":"2.0","id":8,"result":{"content":[],"isError":true}}';
const PROGRESS = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":0,"progress":1}}';

const json = (text: string): BackendResponse => ({ status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(text) });
const sse = (...events: string[]): BackendResponse => ({ status: 200, headers: {}, contentType: 'text/event-stream', body: syntheticBody(events.map((e) => `event: message\ndata: ${e}\n\n`).join('')) });

describe('an observer that acts only on errors', () => {
  it('is not told a JSON answer without one, and is settled once', async () => {
    const w = watcher(true);
    const res = observedAnswer(json(OK), w.observer);
    assert.equal(await res.body.text(), OK, 'the answer passes as it came');
    assert.deepEqual(w.seen, []);
    assert.equal(w.settled(), 1);
  });

  it('is told a JSON answer with one', async () => {
    const w = watcher(true);
    await observedAnswer(json(FAILED), w.observer).body.text();
    assert.deepEqual(w.seen, [8]);
    assert.equal(w.settled(), 1);
  });

  it('read whole over SSE: told only the events that may hold an error', async () => {
    const w = watcher(true);
    await observedAnswer(sse(PROGRESS, FAILED, OK), w.observer).body.text();
    assert.deepEqual(w.seen, [8]);
    assert.equal(w.settled(), 1);
  });

  it('iterated over SSE: told every event as it passes, the response before the stream ends', async () => {
    const w = watcher(true);
    const res = observedAnswer(sse(PROGRESS, OK), w.observer);
    const seenAtChunk: number[] = [];
    for await (const _ of res.body) seenAtChunk.push(w.seen.length);
    assert.deepEqual(w.seen, ['notifications/progress', 7]);
    assert.equal(seenAtChunk.at(-1), 2, 'told before the last chunk was handed on');
    assert.equal(w.settled(), 1);
  });

  it('joined by an observer that wants every message: both are told each one', async () => {
    const span = watcher(true);
    const audit = watcher(false);
    const res = observedAnswer(observedAnswer(json(OK), span.observer), audit.observer);
    await res.body.text();
    assert.deepEqual(span.seen, [7]);
    assert.deepEqual(audit.seen, [7]);
    const other = watcher(true);
    const first = watcher(false);
    await observedAnswer(observedAnswer(json(OK), first.observer), other.observer).body.text();
    assert.deepEqual(first.seen, [7]);
    assert.deepEqual(other.seen, [7], 'joining a watch that reads every message');
  });
});
