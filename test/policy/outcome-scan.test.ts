/**
 * The audit's outcome read from an answer's text without parsing it (src/policy/outcome-scan.ts,
 * issue 30 "Cost"): only the top-level `id`, `method`, `error.code` and `result.isError` count,
 * whatever the same bytes do inside strings or deeper objects; anything but one complete
 * object is left to JSON.parse. Each case is checked against what JSON.parse would give.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Readable } from 'node:stream';
import { syntheticBody, type BackendBody } from '../../src/backends/body.js';
import { editAnswer } from '../../src/policy/answer-edit.js';
import { outcomeOf } from '../../src/policy/audit-calls.js';
import { scanResponse } from '../../src/policy/outcome-scan.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

/** The scan of a text's UTF-8, as a JSON answer's bytes reach it. */
const scan = (text: string) => scanResponse(Buffer.from(text, 'utf8'));

/** What the audit makes of a message: its id, whether it is a request, and its outcome. */
const facts = (m: JsonRpcMessage) => ({ id: m.id ?? null, request: m.method !== undefined, ...outcomeOf(m) });

function same(text: string): void {
  const scanned = scan(text);
  assert.ok(scanned, `scanned: ${text}`);
  assert.deepEqual(facts(scanned as JsonRpcMessage), facts(JSON.parse(text) as JsonRpcMessage), text);
}

describe('outcome scan', () => {
  it('reads ok, isError and error codes as JSON.parse does', () => {
    same('{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}');
    same('{"result":{"content":[],"isError":true},"jsonrpc":"2.0","id":"a-1"}');
    same('{"result":{"isError":false},"jsonrpc":"2.0","id":3}');
    same('{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"Unknown tool: x"}}');
    same('{"jsonrpc":"2.0","id":5,"error":{"message":"no code"}}');
    same(' \n{ "jsonrpc" : "2.0" , "id" : 6 , "result" : { "isError" : true } }\n');
    same('{"jsonrpc":"2.0","id":"\\u00e9t\\"é","result":{}}');
    same('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}');
  });

  it('reads error.message, for the span status, as JSON.parse does', () => {
    for (const text of ['{"jsonrpc":"2.0","id":1,"error":{"message":"Unknown tool: \\"x\\"","code":-32602}}', '{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":7,"data":{"message":"deep"}}}']) {
      const parsed = JSON.parse(text) as { error: { code: number; message: unknown } };
      assert.deepEqual(scan(text)?.error, { code: parsed.error.code, message: typeof parsed.error.message === 'string' ? parsed.error.message : undefined }, text);
    }
  });

  it('ignores the same bytes inside strings and nested objects', () => {
    // A tool's text quoting an error answer, and an `isError` / `error` one level too deep.
    same(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: '{"isError":true,"error":{"code":-1}}' }] } }));
    same(JSON.stringify({ jsonrpc: '2.0', id: 2, result: { structuredContent: { isError: true, error: { code: -32000 } } } }));
    same(JSON.stringify({ jsonrpc: '2.0', id: 3, result: { content: [{ type: 'text', text: 'ends with a backslash \\' }], isError: true } }));
    same(JSON.stringify({ jsonrpc: '2.0', id: 4, result: { 'key with "isError":true': 1, nested: [{ isError: true }] } }));
    same(JSON.stringify({ jsonrpc: '2.0', id: 5, result: { text: '"}' }, error: { code: -32001 } }));
    same('{"jsonrpc":"2.0","id":6,"result":{"isError":true,"isError":false}}');
    same('{"jsonrpc":"2.0","id":7,"error":null,"result":{}}');
  });

  it('leaves batches and incomplete or trailing text to JSON.parse', () => {
    assert.equal(scan('[{"jsonrpc":"2.0","id":1,"result":{}}]'), undefined);
    assert.equal(scan('{"jsonrpc":"2.0","id":1,"result":{'), undefined);
    assert.equal(scan('{"jsonrpc":"2.0","id":1,"result":{}} {"id":2}'), undefined);
    assert.equal(scan('{"jsonrpc":"2.0","id":"unterminated}'), undefined);
    assert.equal(scan('not json'), undefined);
  });

  it('refuses text JSON.parse refuses, wherever it sits, rather than read an outcome from it', () => {
    // A backend is not trusted: each of these would have given an id or an outcome to a
    // scan that only counted brackets. JSON.parse refuses every one, and so does the scan.
    const refused = [
      '{"jsonrpc":"2.0","id":0x10,"result":{}}', // not a JSON number
      '{"jsonrpc":"2.0","id":01,"result":{}}',
      '{"jsonrpc":"2.0","id":1.,"result":{}}',
      '{"jsonrpc":"2.0","id":"a\u0001b","result":{}}', // a raw control character in a read string
      '{"jsonrpc":"2.0","id":1 "result":{}}', // no comma between members
      '{"jsonrpc":"2.0","id" 1,"result":{}}', // no colon
      '{"jsonrpc":"2.0",id:1,"result":{}}', // a name without quotes
      '{"jsonrpc":"2.0","id":1,"result":{"content":[}]}}', // brackets of the wrong kind, in a skipped value
      '{"jsonrpc":"2.0","id":1,"result":{"content":["a]}}', // a string in a skipped value that never closes
      '{"jsonrpc":"2.0","id":1,"result":{"content":[{"text":"}]"}}', // a skipped value closed only inside a string
      '{"jsonrpc":"2.0","id":1,"result":{"isError":tru}}', // a literal cut short
      '{"jsonrpc":"2.0","id":1,"result":{"isError":yes}}',
      '{"jsonrpc":"2.0","id":1,"result":{},}', // a trailing comma
      '{"jsonrpc":"2.0","id":1,"error":{"code":-,"message":"x"}}',
      '{"jsonrpc":"2.0","id":"\\x41","result":{}}', // an escape JSON has not
      '\ufeff{"jsonrpc":"2.0","id":1,"result":{}}', // a byte order mark before the message
    ];
    for (const text of refused) {
      assert.throws(() => JSON.parse(text), `JSON.parse refuses ${text}`);
      assert.equal(scan(text), undefined, text);
    }
  });

  it('finds the end of a long string past escaped quotes and backslashes, wherever they fall', () => {
    // The first bytes of a string are looked at one by one, the rest searched for its quote:
    // escapes on both sides of that boundary, and strings long enough for a tool's output.
    for (let length = 30; length <= 70; length++) {
      for (const escape of ['\\"', '\\\\', '\\\\\\"', 'é"', '\\u0022']) {
        const body = 'x'.repeat(length - 2) + escape.replace('é"', 'é');
        const tail = JSON.parse(`"${escape === 'é"' ? 'é' : escape}"`) as string;
        const text = JSON.stringify({ result: { content: [{ type: 'text', text: `${'y'.repeat(length)}${tail}"}` }], isError: length % 2 === 0 }, jsonrpc: '2.0', id: body });
        same(text);
      }
    }
    same(JSON.stringify({ result: { content: [{ type: 'text', text: `${'"'.repeat(5000)}\\`.repeat(20) }] }, jsonrpc: '2.0', id: 'long' }));
  });

  it('leaves nesting deeper than it matches to JSON.parse, and reads the rest as JSON.parse does', () => {
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    assert.equal(scan(`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":${deep(40)}}}`), undefined);
    same(`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":${deep(20)},"isError":true}}`);
    same('{"jsonrpc":"2.0","id":-0.5e+3,"result":{"isError":true}}');
    same('{"jsonrpc":"2.0","i\\u0064":"x","r\\u0065sult":{"is\\u0045rror":true}}');
    same('{"jsonrpc":"2.0","id":1,"error":{"c\\u006fde":-32601,"message":"\\u00e9"}}');
    same('{"jsonrpc":"2.0","id":2,"result":[1,2],"error":{"code":-32000}}');
  });
});

/** A backend body as the exchange gives one: bytes, with its length declared in the headers. */
function answer(text: string): { status: number; headers: Record<string, string>; contentType: string; body: BackendBody } {
  return { status: 200, headers: { 'content-length': String(Buffer.byteLength(text)) }, contentType: 'application/json', body: syntheticBody(Readable.from([Buffer.from(text)])) };
}

describe('an answer only observed by the audit', () => {
  it('passes with its length and bytes as sent, and the observer sees its outcome', async () => {
    const text = '{"result":{"content":[{"type":"text","text":"{\\"isError\\":true}"}],"isError":true},"jsonrpc":"2.0","id":9}';
    const seen: JsonRpcMessage[] = [];
    const res = editAnswer(answer(text), { errors: [], listIds: new Map(), visible: () => true, observe: { observe: (m) => void seen.push(m) } });
    assert.equal(res.headers['content-length'], String(Buffer.byteLength(text)), 'the length is kept: the relay can answer in one write');
    assert.equal(await res.body.text(), text);
    assert.deepEqual(seen.map(facts), [{ id: 9, request: false, outcome: 'isError' }]);
  });

  it('is observed when read chunk by chunk too, and a batch is parsed', async () => {
    const text = '[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}]';
    const seen: JsonRpcMessage[] = [];
    const res = editAnswer(answer(text), { errors: [], listIds: new Map(), visible: () => true, observe: { observe: (m) => void seen.push(m) } });
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).toString('utf8'), text);
    assert.deepEqual(seen.map(facts), [
      { id: 1, request: false, outcome: 'ok' },
      { id: 2, request: false, outcome: 'error', code: -32601 },
    ]);
  });
});
