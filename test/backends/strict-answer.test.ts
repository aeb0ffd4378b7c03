/**
 * The strict reader of answers the gateway judges or edits (src/backends/strict-answer.ts,
 * issue 41 §1): exact ids (type included), one response per request, no BOM, no batch for a
 * single request, one candidate per judged id on a stream; notifications and server requests
 * pass in order with their event ids; a refused answer becomes -32010 under the client's ids.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { editStrictly, readStrictAnswer, type StrictExpectation } from '../../src/backends/strict-answer.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';
import { createSseReader } from '../../src/wire/sse.js';

function response(contentType: string, body: string | Buffer, status = 200): BackendResponse {
  return { status, headers: { 'content-type': contentType, 'content-length': String(body.length) }, contentType, body: syntheticBody(typeof body === 'string' ? body : (async function* () { yield body; })()) };
}

const one: StrictExpectation = { judged: [1], sent: [1], batch: false };
const listed = (id: unknown, tools: unknown[] = [{ name: 'search' }]) => JSON.stringify({ jsonrpc: '2.0', id, result: { tools } });
const sse = (...datas: string[]) => datas.map((d, i) => `id: e${i}\ndata: ${d}\n\n`).join('');
const progress = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
const serverRequest = JSON.stringify({ jsonrpc: '2.0', id: 'srv-1', method: 'sampling/createMessage', params: {} });

async function verdict(res: BackendResponse, expect = one): Promise<string> {
  const read = await readStrictAnswer(res, expect);
  return 'unreadable' in read ? read.unreadable : 'readable';
}

function events(text: string): Array<{ id?: string; data: string }> {
  const out: Array<{ id?: string; data: string }> = [];
  createSseReader({ onEvent: (data, id) => out.push({ ...(id === undefined ? {} : { id }), data }) }).feed(text);
  return out;
}

describe('readStrictAnswer', () => {
  test('an exact JSON answer is readable, its response found by id', async () => {
    const read = await readStrictAnswer(response('application/json', listed(1)), one);
    assert.ok(!('unreadable' in read));
    assert.deepEqual([...read.responses.keys()], ['number:1']);
  });

  test('a string id for a numeric request is unreadable, and says it matches loosely', async () => {
    assert.match(await verdict(response('application/json', listed('1'))), /id "1", which the request did not send \(it matches id 1 loosely\)/);
    assert.match(await verdict(response('application/json', listed(1)), { judged: ['1'], sent: ['1'], batch: false }), /id 1, which the request did not send/);
  });

  test('ids a v1 client would take for the request (null for 0, "0x1", " 1 ") are unreadable', async () => {
    assert.match(await verdict(response('application/json', listed(null)), { judged: [0], sent: [0], batch: false }), /loosely/);
    assert.match(await verdict(response('application/json', listed('0x1'))), /loosely/);
    assert.match(await verdict(response('application/json', listed(' 1 '))), /loosely/);
  });

  test('a byte-order mark before JSON, and before SSE, is unreadable', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    assert.equal(await verdict(response('application/json', Buffer.concat([bom, Buffer.from(listed(1))]))), 'a byte-order mark before the body');
    assert.equal(await verdict(response('text/event-stream', Buffer.concat([bom, Buffer.from(sse(listed(1)))]))), 'a byte-order mark before the body');
  });

  test('a body that is not JSON, or JSON lines, is unreadable', async () => {
    assert.equal(await verdict(response('application/json', 'not json')), 'a body that is not JSON');
    assert.equal(await verdict(response('application/json', `${listed(1)}\n${listed(1)}`)), 'a body that is not JSON');
    assert.equal(await verdict(response('text/event-stream', sse('{"jsonrpc":'))), 'a body that is not JSON');
  });

  test('two members of one name are unreadable (parsers differ on which wins)', async () => {
    assert.match(await verdict(response('application/json', '{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":{"tools":[{"name":"x"}]}}')), /two members "result"/);
  });

  test('a batch for a single request is unreadable; for a batch POST it is read', async () => {
    assert.equal(await verdict(response('application/json', `[${listed(1)}]`)), 'a batch answering a single request');
    assert.equal(await verdict(response('application/json', `[${listed(1)},{"jsonrpc":"2.0","id":2,"result":{}}]`), { judged: [1], sent: [1, 2], batch: true }), 'readable');
  });

  test('two responses to one id, in JSON or across SSE events, are unreadable', async () => {
    assert.equal(await verdict(response('application/json', `[${listed(1)},${listed(1)}]`), { judged: [1], sent: [1], batch: true }), 'two responses to id 1');
    assert.equal(await verdict(response('text/event-stream', sse(listed(1), listed(1)))), 'two responses to id 1');
  });

  test('two SSE candidates (a loose one first, the exact one after) are unreadable', async () => {
    assert.match(await verdict(response('text/event-stream', sse(listed('1', [{ name: 'poisoned' }]), listed(1)))), /id "1".*loosely/);
  });

  test('a response to an id the POST did not send, or with neither result nor error, is unreadable', async () => {
    assert.match(await verdict(response('text/event-stream', sse(listed(99), listed(1)))), /id 99, which the request did not send$/);
    assert.match(await verdict(response('application/json', '{"jsonrpc":"2.0","id":1}')), /neither a result nor an error/);
  });

  test('another content type is unreadable', async () => {
    assert.equal(await verdict(response('text/plain', listed(1))), 'content type "text/plain"');
  });

  test('a refused answer names the candidates a lenient client would take (BOM skipped, ids loose), for pinning to judge', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const read = await readStrictAnswer(response('application/json', Buffer.concat([bom, Buffer.from(listed(1, [{ name: 'a' }]))])), one);
    assert.ok('unreadable' in read);
    assert.deepEqual(read.candidates.map((m) => m.result), [{ tools: [{ name: 'a' }] }]);
    const two = await readStrictAnswer(response('text/event-stream', sse(listed('1', [{ name: 'poisoned' }]), listed(1), listed(7))), one);
    assert.ok('unreadable' in two);
    assert.deepEqual(two.candidates.map((m) => m.id), ['1', 1], 'the answer to another id is no candidate');
  });

  test('notifications and server requests beside the response are readable', async () => {
    assert.equal(await verdict(response('text/event-stream', `id: p\ndata: \n\n${sse(progress, serverRequest, listed(1))}`)), 'readable');
  });
});

describe('editStrictly', () => {
  const expect = { backend: 'notes', ...one };
  const rename = (m: JsonRpcMessage): JsonRpcMessage => (m.id === 1 && m.method === undefined ? { ...m, result: { tools: [] } } : m);

  test('a readable SSE answer: events and their ids pass in order, only the response rewritten', async () => {
    const refused: string[] = [];
    const res = editStrictly(response('text/event-stream', sse(progress, serverRequest, listed(1))), { ...expect, edit: () => rename, refused: (e) => refused.push(e.message) });
    assert.equal(res.headers['content-length'], undefined);
    assert.deepEqual(events(await res.body.text()), [
      { id: 'e0', data: progress },
      { id: 'e1', data: serverRequest },
      { id: 'e2', data: JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [] } }) },
    ]);
    assert.deepEqual(refused, []);
  });

  test('a readable JSON answer that nothing changes is sent as the backend wrote it', async () => {
    const text = ` ${listed(1)}\n`;
    const res = editStrictly(response('application/json', text), { ...expect, edit: () => (m) => m, refused: () => assert.fail('not refused') });
    assert.equal(await res.body.text(), text);
  });

  test('an unreadable JSON answer becomes -32010 under the client\'s own id, naming backend and reason', async () => {
    const refused: string[] = [];
    const res = editStrictly(response('application/json', listed('1')), { ...expect, edit: () => rename, refused: (e) => refused.push(String(e.rpcData.unreadable)) });
    const answer = JSON.parse(await res.body.text()) as JsonRpcMessage;
    assert.equal(answer.id, 1);
    assert.equal(answer.error?.code, -32010);
    assert.match(answer.error!.message, /backend "notes" sent an answer the gateway cannot judge \(a response to id "1"/);
    assert.deepEqual(answer.error?.data, { backend: 'notes', reason: 'protocol', unreadable: refused[0] });
    assert.equal(refused.length, 1);
    assert.ok(!JSON.stringify(answer).includes('search'), 'nothing of the backend\'s answer');
  });

  test('an unreadable SSE answer stays SSE: the errors as events; a batch gets one per request, its added errors kept', async () => {
    const res = editStrictly(response('text/event-stream', sse(listed(1), listed(1))), { backend: 'notes', judged: [1], sent: [1, 'b'], batch: true, added: [{ jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Unknown tool: x' } }], edit: () => rename, refused: () => {} });
    assert.equal(res.contentType, 'text/event-stream');
    const sent = events(await res.body.text()).map((e) => JSON.parse(e.data) as JsonRpcMessage);
    assert.deepEqual(sent.map((m) => [m.id, m.error?.code]), [[1, -32010], ['b', -32010], [3, -32602]]);
  });

  test('an unreadable text/plain answer becomes application/json', async () => {
    const res = editStrictly(response('text/plain', 'hello'), { ...expect, edit: () => rename, refused: () => {} });
    assert.equal(res.contentType, 'application/json');
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal((JSON.parse(await res.body.text()) as JsonRpcMessage).error?.code, -32010);
  });

  test('an HTTP error or a 202 passes untouched (nothing to judge)', () => {
    for (const status of [202, 500]) {
      const res = response('application/json', '', status);
      assert.equal(editStrictly(res, { ...expect, edit: () => rename, refused: () => {} }), res);
    }
  });
});
