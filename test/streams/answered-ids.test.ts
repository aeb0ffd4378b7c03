/**
 * `answersExactly` (src/streams/answered-ids.ts): when one SSE event is the whole answer to a
 * POST, so that both eras' relays may send it as plain JSON (issue 29). The odd events keep the
 * stream: a batch answer to a single request, an answer to another id, a notification alone or
 * beside the response, a second answer to the same id.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answersExactly } from '../../src/streams/answered-ids.js';

const response = (id: unknown, member: 'result' | 'error' = 'result') => ({ jsonrpc: '2.0', id, [member]: member === 'result' ? {} : { code: -32601, message: 'no' } });
const notification = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: 1 } };
const text = (value: unknown) => JSON.stringify(value);

test('the response to the one request answers it, a result or an error', () => {
  assert.equal(answersExactly(text(response(1)), [1]), true);
  assert.equal(answersExactly(text(response('a', 'error')), ['a']), true);
});

test('an answer to another id, or to the same id in another type, does not', () => {
  assert.equal(answersExactly(text(response(2)), [1]), false);
  assert.equal(answersExactly(text(response('1')), [1]), false);
});

test('a notification alone, or a request from the server, does not', () => {
  assert.equal(answersExactly(text(notification), [1]), false);
  assert.equal(answersExactly(text({ jsonrpc: '2.0', id: 1, method: 'sampling/createMessage', params: {} }), [1]), false);
});

test('a batch answer in one event answers a batch POST only when it holds exactly one response per request', () => {
  assert.equal(answersExactly(text([response(1), response(2)]), [1, 2], true), true);
  assert.equal(answersExactly(text([response(2), response(1)]), [1, 2], true), true, 'in any order');
  assert.equal(answersExactly(text([response(1)]), [1, 2], true), false, 'one request left unanswered');
  assert.equal(answersExactly(text([response(1), response(1)]), [1, 2], true), false, 'the same id twice');
  assert.equal(answersExactly(text([response(1), response(2), notification]), [1, 2], true), false, 'a notification beside the responses');
  assert.equal(answersExactly(text([response(1), response(2), response(3)]), [1, 2], true), false, 'an answer to a request not made');
});

test('the shape follows the POST: a batch answer to a single request, or one object to a batch, does not answer it', () => {
  assert.equal(answersExactly(text([response(1)]), [1]), false);
  assert.equal(answersExactly(text(response(1)), [1], true), false);
});

test('data that is not JSON, or a POST with no request, is never answered by an event', () => {
  assert.equal(answersExactly('{"jsonrpc":"2.0","id":1,"result":{', [1]), false);
  assert.equal(answersExactly('', [1]), false);
  assert.equal(answersExactly(text([]), [], true), false);
});
