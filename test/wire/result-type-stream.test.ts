/**
 * `createResultTypeStream` (src/wire/result-type-stream.ts): `resultType` written into a
 * response as its bytes pass, at the result's closing brace and only when the result does not
 * name its type; anything that does not open as a response with a result is `other`. Every
 * body is fed whole, byte by byte and in odd-sized chunks: the answer must not depend on where
 * the socket split it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createResultTypeStream, OPENING_MAX_BYTES, type OpeningVerdict } from '../../src/wire/result-type-stream.js';

function run(body: string, size: number): { out: string; verdict: OpeningVerdict; ended: boolean } {
  const stream = createResultTypeStream();
  const bytes = Buffer.from(body);
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(...stream.feed(bytes.subarray(at, at + size)));
  return { out: Buffer.concat(out).toString('utf8'), verdict: stream.verdict, ended: stream.ended };
}

/** The same answer whatever the chunking. */
function each(body: string): { out: string; verdict: OpeningVerdict; ended: boolean } {
  const answers = [body.length || 1, 1, 7, 64].map((size) => run(body, size));
  for (const answer of answers.slice(1)) assert.deepEqual(answer, answers[0]);
  return answers[0]!;
}

describe('a response with a result', () => {
  test('gets resultType at its result\'s closing brace, the bytes before it untouched', () => {
    const body = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a}b\\"{ é resultType"}],"structuredContent":{"resultType":"x"}}}';
    const { out, verdict, ended } = each(body);
    assert.equal(verdict, 'response');
    assert.equal(ended, true);
    assert.equal(out, `${body.slice(0, -2)},"resultType":"complete"}}`);
    assert.equal((JSON.parse(out) as { result: { resultType: string } }).result.resultType, 'complete');
  });

  test('an empty result gets the member alone, white space kept', () => {
    assert.equal(each('{"id":"a","jsonrpc":"2.0","result":{ }}').out, '{"id":"a","jsonrpc":"2.0","result":{ "resultType":"complete"}}');
  });

  test('a result that names its type, first, last or escaped, passes byte for byte', () => {
    for (const body of [
      '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}',
      '{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"input_required"}}',
      '{"jsonrpc":"2.0","id":1,"result":{"content":[],"result\\u0054ype":"complete"}}',
    ]) assert.deepEqual(each(body), { out: body, verdict: 'response', ended: true });
  });

  test('members after the result pass, and nothing after the message does', () => {
    const { out, ended } = each('{"jsonrpc":"2.0","id":2,"result":{"a":1},"x":[1]}\n{"jsonrpc":"2.0","method":"late"}');
    assert.equal(out, '{"jsonrpc":"2.0","id":2,"result":{"a":1,"resultType":"complete"},"x":[1]}');
    assert.equal(ended, true);
  });

  test('the opening not yet read whole is pending, nothing lost', () => {
    const stream = createResultTypeStream();
    assert.equal(Buffer.concat(stream.feed(Buffer.from('{"jsonrpc":"2.0","id":'))).toString(), '{"jsonrpc":"2.0","id":');
    assert.equal(stream.verdict, 'pending');
    stream.feed(Buffer.from('3,"result":{"a"'));
    assert.equal(stream.verdict, 'response');
  });
});

describe('anything else is other', () => {
  test('a notification first (JSON lines), an error, a batch, a request', () => {
    for (const body of [
      '{"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n{"jsonrpc":"2.0","id":1,"result":{}}',
      '{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}',
      '[{"jsonrpc":"2.0","id":1,"result":{}}]',
      '{"jsonrpc":"2.0","id":{"x":1},"result":{}}',
      '{"jsonrpc":"2.0","id":1,"result":[1]}',
      'not json',
    ]) assert.equal(each(body).verdict, 'other', body);
  });

  test('an opening not decided within the bound', () => {
    const id = 'i'.repeat(OPENING_MAX_BYTES);
    assert.equal(each(`{"jsonrpc":"2.0","id":"${id}","result":{}}`).verdict, 'other');
  });
});
