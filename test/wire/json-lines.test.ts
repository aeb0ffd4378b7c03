import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createJsonMessageSplitter, maySpanLines, MessageTooLargeError } from '../../src/wire/json-lines.js';

const texts = (buffers: Buffer[]) => buffers.map((b) => b.toString('utf8'));

describe('createJsonMessageSplitter', () => {
  test('JSON lines come out one message each, as each completes, whatever the chunking', () => {
    const body = '{"jsonrpc":"2.0","method":"a","params":{"x":[1,{"y":2}]}}\n{"jsonrpc":"2.0","id":1,"result":{}}\n';
    for (let cut = 1; cut < body.length; cut++) {
      const splitter = createJsonMessageSplitter();
      const out = [...splitter.feed(Buffer.from(body.slice(0, cut))), ...splitter.feed(Buffer.from(body.slice(cut)))];
      assert.deepEqual(texts(out), ['{"jsonrpc":"2.0","method":"a","params":{"x":[1,{"y":2}]}}', '{"jsonrpc":"2.0","id":1,"result":{}}'], `cut at ${cut}`);
      assert.equal(splitter.end(), undefined);
    }
  });

  test('brackets, quotes and escapes inside strings do not end a message', () => {
    const message = '{"text":"} ] \\" \\\\","more":"{[\\u00e9]}"}';
    const splitter = createJsonMessageSplitter();
    assert.deepEqual(texts(splitter.feed(Buffer.from(`${message}\n${message}`))), [message, message]);
  });

  test('a pretty-printed message is one message; a multi-byte character split across chunks stays whole', () => {
    const message = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { text: 'héllo ✓' } }, null, 2);
    const bytes = Buffer.from(message);
    const cut = bytes.indexOf(Buffer.from('✓')) + 1;
    const splitter = createJsonMessageSplitter();
    const out = [...splitter.feed(bytes.subarray(0, cut)), ...splitter.feed(bytes.subarray(cut))];
    assert.deepEqual(out.map((b) => JSON.parse(b.toString('utf8'))), [JSON.parse(message)]);
  });

  test('a message the body ends inside is handed back by end(), as it is', () => {
    const splitter = createJsonMessageSplitter();
    assert.deepEqual(texts(splitter.feed(Buffer.from('{"a":1}\n{"b":'))), ['{"a":1}']);
    assert.equal(splitter.end()?.toString('utf8'), '{"b":');
  });
});

describe('createJsonMessageSplitter with maxBytes', () => {
  test('messages up to the bound pass; one past it throws as soon as the bound is passed, in one chunk or across several', () => {
    const small = '{"a":"' + 'x'.repeat(50) + '"}';
    const splitter = createJsonMessageSplitter(64);
    assert.deepEqual(texts(splitter.feed(Buffer.from(`${small}\n${small}\n`))), [small, small]);
    assert.throws(() => createJsonMessageSplitter(64).feed(Buffer.from('{"a":"' + 'x'.repeat(80) + '"}')), MessageTooLargeError);
    const open = createJsonMessageSplitter(64);
    open.feed(Buffer.from('{"a":"' + 'x'.repeat(40)));
    assert.throws(() => open.feed(Buffer.from('x'.repeat(40))), /exceeded 64 bytes/);
  });
});

describe('maySpanLines', () => {
  test('compact JSON, with or without a final newline, is one message', () => {
    assert.equal(maySpanLines(Buffer.from('{"a":"b\\nc"}')), false);
    assert.equal(maySpanLines(Buffer.from('{"a":1}\n')), false);
    assert.equal(maySpanLines(Buffer.from('{"a":1}\r\n \n')), false);
  });

  test('a second line with content may be a second message', () => {
    assert.equal(maySpanLines(Buffer.from('{"a":1}\n{"b":2}\n')), true);
    assert.equal(maySpanLines(Buffer.from('{\n  "a": 1\n}')), true);
  });
});
