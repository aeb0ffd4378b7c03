/**
 * `answersExactly` (src/streams/answered-ids.ts): when one SSE event is the whole answer to a
 * POST, so that both eras' relays may send it as plain JSON (issue 29). The odd events keep the
 * stream: a batch answer to a single request, an answer to another id, a notification alone or
 * beside the response, a second answer to the same id.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answeredIdKeys, answersExactly, idKey } from '../../src/streams/answered-ids.js';
import type { JsonRpcId } from '../../src/wire/jsonrpc.js';

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

test('one answer read without parsing decides as a parse would (issue 29)', () => {
  const cases: Array<[string, JsonRpcId, boolean]> = [
    ['{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \\"method\\": here"}]}}', 1, true],
    [' {"result":{"method":"nested, not the message\'s"},"id":"a"}\n', 'a', true],
    ['{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"x"}}', 7, true],
    // An id written otherwise than JSON.stringify writes it: parsed, with the same verdict.
    ['{"id":1.0,"result":{}}', 1, true],
    ['{"id":"\\u0061","result":{}}', 'a', true],
    ['{"id":10,"result":{}}', 1, false],
    ['{"id":-1,"result":{}}', 1, false],
    ['{"id":"1","result":{}}', 1, false],
    ['{"id":null,"result":{}}', 1, false],
    // Duplicate names: the last counts, as JSON.parse keeps it.
    ['{"id":2,"result":{},"id":1}', 1, true],
    ['{"id":1,"result":{},"id":2}', 1, false],
    // A member name spelled with an escape is still that member.
    ['{"id":1,"result":{},"\\u006dethod":"x"}', 1, false],
    ['{"id":1,"result":{},"method":"notifications/message"}', 1, false],
    ['{"id":1}', 1, false],
    // Not one whole object: refused as the parse refuses it.
    ['{"id":1,"result":{}} trailing', 1, false],
    ['{"id":1,"result":{}', 1, false],
    ['[{"id":1,"result":{}}]', 1, false],
  ];
  for (const [data, id, verdict] of cases) {
    assert.equal(answersExactly(data, [id]), verdict, data);
    assert.equal(answersExactly(data, [id]), parsedVerdict(data, id), `the same as a parse: ${data}`);
  }
});

/** What answersExactly decided before the scan, from the parsed message. */
function parsedVerdict(data: string, id: JsonRpcId): boolean {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(data) as Record<string, unknown>;
  } catch {
    return false;
  }
  if (!m || typeof m !== 'object' || Array.isArray(m) || 'method' in m || !('result' in m || 'error' in m)) return false;
  return typeof m.id === typeof id && m.id === id;
}

test('answeredIdKeys: what a scan tells (a notification, a server request, no outcome) is what the parse tells', () => {
  // The reference: the parse, as answeredIdKeys read every event before issue 29.
  const parsed = (data: string): string[] => {
    let m: unknown;
    try {
      m = JSON.parse(data);
    } catch {
      return [];
    }
    return (Array.isArray(m) ? m : [m]).flatMap((x) => {
      if (!x || typeof x !== 'object' || 'method' in x || !('result' in x || 'error' in x)) return [];
      const id = (x as { id?: unknown }).id;
      return typeof id === 'string' || typeof id === 'number' ? [idKey(id)] : [];
    });
  };
  const cases = [
    text(notification),
    text({ jsonrpc: '2.0', id: 1, method: 'sampling/createMessage', params: {} }),
    text(response(1)),
    text(response('a', 'error')),
    text([response(1), notification]),
    '{"jsonrpc":"2.0","id":1}',
    '{"jsonrpc":"2.0","id":1,"result":{},"method":"x"}',
    '{"jsonrpc":"2.0","method":"x","method":"y"}',
    '{"jsonrpc":"2.0","id":1,"result":{}',
    '{"jsonrpc":"2.0","id":1,"method":"x"} trailing',
    '{"jsonrpc":"2.0","id":7,"r\\u0065sult":{}}',
    '{"jsonrpc":"2.0","id":7,"m\\u0065thod":"x","result":{}}',
    ' \n{"id":"x","error":{"code":1,"message":"m"},"jsonrpc":"2.0"}',
    '{"params":{"result":1,"method":"x"},"jsonrpc":"2.0","method":"notifications/message"}',
    'not json',
    '',
  ];
  for (const data of cases) assert.deepEqual([...answeredIdKeys(data)], parsed(data), data);
});
