/**
 * `resultType` on every result (MCP 2026-07-28 changelog, major change 8; src/wire/result-type.ts):
 * added as "complete" where missing, never over an existing one, never on errors; the text
 * variant gives what parsing would, whichever path it takes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isInputRequired, withResultType, withResultTypeBytes, withResultTypeText } from '../../src/wire/result-type.js';

describe('withResultType', () => {
  test('adds "complete" to a result without one, leaving the input alone', () => {
    const message = { jsonrpc: '2.0', id: 1, result: { tools: [] } };
    assert.deepEqual(withResultType(message), { jsonrpc: '2.0', id: 1, result: { tools: [], resultType: 'complete' } });
    assert.deepEqual(message.result, { tools: [] });
  });

  test('an error, a notification, an input_required or unknown resultType come back as the same object', () => {
    for (const message of [
      { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'x' } },
      { jsonrpc: '2.0', method: 'notifications/progress', params: {} },
      { jsonrpc: '2.0', id: 1, result: { resultType: 'input_required', inputRequests: {} } },
      { jsonrpc: '2.0', id: 1, result: { resultType: 'some_future_kind' } },
      { jsonrpc: '2.0', id: 1, result: null },
    ]) {
      assert.equal(withResultType(message), message);
    }
  });

  test('isInputRequired', () => {
    assert.equal(isInputRequired({ resultType: 'input_required', requestState: 's' }), true);
    assert.equal(isInputRequired({ resultType: 'complete' }), false);
    assert.equal(isInputRequired({}), false);
    assert.equal(isInputRequired(null), false);
    assert.equal(isInputRequired('input_required'), false);
  });
});

/** What parsing gives: the reference every text answer must equal. */
function parsed(text: string): unknown {
  return withResultType(JSON.parse(text) as object);
}

describe('withResultTypeText', () => {
  test('the usual shapes get the member written in, and read as parsing would', () => {
    for (const text of [
      '{"result":{"content":[{"type":"text","text":"hi"}]},"jsonrpc":"2.0","id":1}',
      '{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}',
      '{"id":"a\\"b","jsonrpc":"2.0","result":{"x":1}}',
      ' { "jsonrpc" : "2.0" , "id" : -3 , "result" : { "x" : { "result" : {} } } } ',
      '{"jsonrpc":"2.0","id":1,"result":{}}',
      '{"jsonrpc":"2.0","id":1,"result":{ }}',
    ]) {
      const out = withResultTypeText(text);
      assert.notEqual(out, text);
      assert.deepEqual(JSON.parse(out), parsed(text), text);
    }
  });

  test('the fast path writes exactly one member after the result\'s brace', () => {
    assert.equal(withResultTypeText('{"jsonrpc":"2.0","id":1,"result":{"a":1}}'), '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","a":1}}');
    assert.equal(withResultTypeText('{"result":{},"jsonrpc":"2.0","id":1}'), '{"result":{"resultType":"complete"},"jsonrpc":"2.0","id":1}');
  });

  test('the usual shapes and text without a result are answered without parsing', (t) => {
    const parse = t.mock.method(JSON, 'parse');
    withResultTypeText('{"result":{"content":[]},"jsonrpc":"2.0","id":1}');
    withResultTypeText('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}');
    withResultTypeText('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}');
    assert.equal(parse.mock.callCount(), 0);
    withResultTypeText('{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}');
    assert.equal(parse.mock.callCount(), 0, 'a result typed by its first member passes without a parse');
    withResultTypeText('{"jsonrpc":"2.0","id":1,"result":{"x":1,"resultType":"complete"}}');
    assert.equal(parse.mock.callCount(), 1);
  });

  test('a result already typed, even in nested text or an escaped key, is not typed again', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}',
      '{"jsonrpc":"2.0","id":1,"result":{"result\\u0054ype":"input_required"}}',
      '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}',
    ]) {
      assert.equal(withResultTypeText(text), text);
    }
  });

  test('text that mentions resultType elsewhere, or orders members otherwise, takes the parse path', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"resultType is new"}]}}',
      '{"jsonrpc":"2.0","_meta":{"result":{}},"id":1,"result":{"x":1}}',
      '{"jsonrpc":"2.0","id":1,"result":{"k":"\\u00e9"}}',
    ]) {
      assert.deepEqual(JSON.parse(withResultTypeText(text)), parsed(text), text);
    }
  });

  test('errors, notifications, batches and text that is not JSON pass as they are', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}',
      '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}',
      '[{"jsonrpc":"2.0","id":1,"result":{}}]',
      'not json "result"',
      '{"jsonrpc":"2.0","id":1,"result":{"a":"resultType"',
      '',
    ]) {
      assert.equal(withResultTypeText(text), text);
    }
  });

  test('broken JSON stays broken (the fast path does not validate; the backend\'s text is relayed, not repaired)', () => {
    assert.throws(() => JSON.parse(withResultTypeText('{"jsonrpc":"2.0","id":1,"result":{')));
  });
});

describe('withResultTypeBytes', () => {
  const shaped = (text: string) => withResultTypeBytes(Buffer.from(text)).toString('utf8');

  test('gives the bytes of what the text form gives, for every shape above', () => {
    for (const text of [
      '{"result":{"content":[{"type":"text","text":"hi"}]},"jsonrpc":"2.0","id":1}',
      '{"jsonrpc":"2.0","id":1,"result":{}}',
      '{"jsonrpc":"2.0","id":1,"result":{ }}',
      '{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}',
      '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"resultType is new"}]}}',
      '{"jsonrpc":"2.0","id":1,"result":{"k":"\\u00e9"}}',
      '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}',
      'not json "result"',
    ]) {
      assert.equal(shaped(text), withResultTypeText(text), text);
    }
  });

  test('offsets stay right after multi-byte characters in the id and in the result', () => {
    const text = '{"jsonrpc":"2.0","id":"é—✓","result":{"content":[{"type":"text","text":"naïve ✓"}]}}';
    assert.deepEqual(JSON.parse(shaped(text)), parsed(text));
    assert.equal(shaped(text), withResultTypeText(text));
  });

  test('the same bytes come back, unchanged and uncopied, when there is nothing to add', () => {
    const bytes = Buffer.from('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}');
    assert.equal(withResultTypeBytes(bytes), bytes);
  });

  test('an opening past the head it reads, or an empty result whose brace lies past it, takes the parse path', () => {
    const longId = `{"jsonrpc":"2.0","id":"${'x'.repeat(600)}","result":{"a":1}}`;
    assert.deepEqual(JSON.parse(shaped(longId)), parsed(longId));
    // `"result":{` ends just inside the 512-byte head, its closing brace after a run of spaces beyond it.
    const prefix = '{"jsonrpc":"2.0","id":"';
    const filler = 'y'.repeat(512 - prefix.length - '","result":{'.length - 4);
    const emptyAcross = `${prefix}${filler}","result":{${' '.repeat(20)}}}`;
    assert.deepEqual(JSON.parse(shaped(emptyAcross)), parsed(emptyAcross));
  });

  test('a body longer than the head it reads is searched whole for resultType and \\u escapes', () => {
    const long = 'z'.repeat(600);
    for (const text of [
      `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${long}"}],"resultType":"complete"}}`,
      `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${long}\\u00e9"}]}}`,
      `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${long}"}]}}`,
    ]) {
      const out = withResultTypeBytes(Buffer.from(text)).toString('utf8');
      assert.deepEqual(JSON.parse(out), parsed(text));
      assert.equal(out.split('"resultType"').length, 2, 'exactly one resultType member');
    }
  });
});

describe('a result whose first member is resultType (as a 2026 backend writes it)', () => {
  test('passes untouched, without a parse, as text and as bytes', (t) => {
    const parse = t.mock.method(JSON, 'parse');
    const text = '{"jsonrpc":"2.0","id":7,"result":{ "resultType" : "complete","content":[{"type":"text","text":"resultType"}]}}';
    assert.equal(withResultTypeText(text), text);
    const bytes = Buffer.from(text);
    assert.equal(withResultTypeBytes(bytes), bytes);
    assert.equal(parse.mock.callCount(), 0);
  });

  test('a key named resultType further in, or only nested, still takes the parse path and gets the member', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}],"resultType":"complete"}}',
      '{"jsonrpc":"2.0","id":7,"result":{"content":[{"resultType":"input_required"}]}}',
      '{"jsonrpc":"2.0","id":7,"result":{"_meta":{"resultType":"x"}}}',
    ]) {
      assert.deepEqual(JSON.parse(withResultTypeText(text)), parsed(text), text);
      assert.deepEqual(JSON.parse(withResultTypeBytes(Buffer.from(text)).toString('utf8')), parsed(text), text);
    }
  });
});
