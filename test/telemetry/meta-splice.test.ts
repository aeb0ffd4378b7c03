/**
 * The CLIENT span's context written into a request's `params._meta` by splicing its text
 * (src/telemetry/meta-splice.ts, issue 30 "Cost"): every case must parse to what the
 * re-serialised message gives, and the safe ones must keep the client's bytes as they were
 * (white space, member order) with only the members added.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withMeta, withTraceMetaText } from '../../src/telemetry/meta-splice.js';
import { jsonShapeProblem, topParamsName } from '../../src/wire/json-guard.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

const TRACE = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'v="q\\"x",k=1' };

/**
 * The spliced text, checked to parse as the message re-serialised with the context — and, for a
 * text the route accepts, to be the same whether `params` is found by a walk or where the route's
 * scan saw its name (json-guard.ts topParamsName).
 */
function spliced(text: string): string {
  const message = JSON.parse(text) as JsonRpcMessage;
  const out = withTraceMetaText(text, message, TRACE);
  assert.deepEqual(JSON.parse(out), withMeta(message, TRACE), out);
  if (jsonShapeProblem(text) === undefined) assert.equal(withTraceMetaText(text, message, TRACE, topParamsName()), out, `with the scan's params: ${text}`);
  return out;
}

/** `out` is `text` with one insertion: everything else kept byte for byte. */
function onlyInserted(text: string, out: string): void {
  let head = 0;
  while (head < text.length && text[head] === out[head]) head++;
  assert.equal(out.slice(out.length - (text.length - head)), text.slice(head), `only an insertion: ${out}`);
}

describe('trace context spliced into params._meta', () => {
  it('adds params when it is absent, after the last member', () => {
    const text = '{ "jsonrpc": "2.0", "id": 1, "method": "ping" }';
    const out = spliced(text);
    onlyInserted(text, out);
    assert.match(out, /"method": "ping" ,"params":\{"_meta":\{"traceparent"/);
  });

  it('adds _meta first in params, wherever params is in the message', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
      '{"params":{"name":"echo","arguments":{"params":{"_meta":1}}},"method":"tools/call","id":"x","jsonrpc":"2.0"}',
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{ }}',
    ]) {
      const out = spliced(text);
      onlyInserted(text, out);
    }
  });

  it('keeps the other _meta keys, and an empty _meta', () => {
    for (const text of [
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"e","_meta":{"progressToken":7,"io.x/y":{"a":[1]}}}}',
      '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{}, "name":"e"}}',
    ]) {
      const out = spliced(text);
      onlyInserted(text, out);
      assert.equal((JSON.parse(out) as { params: { _meta: { traceparent: string } } }).params._meta.traceparent, TRACE.traceparent);
    }
  });

  it('is not fooled by "params" or "_meta" inside strings or deeper objects', () => {
    const text = '{"jsonrpc":"2.0","id":"\\"params\\":{","method":"tools/call","params":{"name":"\\"_meta\\":{\\\\","arguments":{"_meta":{"x":1},"s":"}{"}}}';
    const out = spliced(text);
    onlyInserted(text, out);
    assert.deepEqual((JSON.parse(out) as { params: { arguments: unknown } }).params.arguments, { _meta: { x: 1 }, s: '}{' });
  });

  it('takes the last of duplicate params, as JSON.parse does', () => {
    const text = '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"first"},"params":{"name":"last"}}';
    onlyInserted(text, spliced(text));
  });

  it('writes the message again where a splice is unsafe: a context to replace, a \\u escape, params not an object', () => {
    const replaced = spliced('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e","_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","k":1}}}');
    assert.equal((JSON.parse(replaced) as { params: { _meta: Record<string, unknown> } }).params._meta.traceparent, TRACE.traceparent);
    assert.equal((JSON.parse(replaced) as { params: { _meta: Record<string, unknown> } }).params._meta.k, 1);
    // "\u0070arams" is "params": a splice by raw name would add a second one.
    const escaped = spliced('{"jsonrpc":"2.0","id":8,"method":"tools/call","\\u0070arams":{"name":"e"}}');
    assert.equal(escaped.match(/params/g)?.length, 1);
    spliced('{"jsonrpc":"2.0","id":9,"method":"m","params":[1,2]}');
  });

  it('finds params where the route\'s scan saw its name: the top object\'s only, spelled without escapes', () => {
    const at = (text: string) => {
      assert.equal(jsonShapeProblem(text), undefined);
      return topParamsName();
    };
    const text = '{"id":1, "params" :{"name":"echo"},"method":"tools/call"}';
    assert.equal(at(text), text.indexOf('" :'));
    assert.equal(at('{"id":1,"method":"tools/call","params":{"name":"echo","arguments":{"params":{}}}}'), 37);
    assert.equal(at('{"id":1,"method":"ping","x":{"params":{}}}'), -1, 'not a nested object\'s');
    assert.equal(at('{"id":1,"method":"ping","p\\u0061rams":{}}'), -1, 'not an escaped name');
    assert.equal(at('[{"id":1,"method":"ping","params":{}}]'), -1, 'not in a batch');
    assert.equal(at('{"id":1,"method":"ping","text":"\\"params\\":{"}'), -1, 'not inside a string');
    assert.equal(at('{"id":1,"method":"ping"}'), -1);
  });

  it('walks the text when the place it is given is not a params name', () => {
    const text = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}';
    const message = JSON.parse(text) as JsonRpcMessage;
    const walked = withTraceMetaText(text, message, TRACE);
    for (const wrong of [0, 6, text.indexOf('"method"') + 7, text.length - 1, text.length + 5]) assert.equal(withTraceMetaText(text, message, TRACE, wrong), walked, `place ${wrong}`);
  });

  it('escapes the context values as JSON strings', () => {
    const out = spliced('{"jsonrpc":"2.0","id":10,"method":"ping"}');
    assert.equal((JSON.parse(out) as { params: { _meta: Record<string, unknown> } }).params._meta.tracestate, TRACE.tracestate);
  });
});
