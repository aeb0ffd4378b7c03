/**
 * The aggregated endpoint's pure parts: the name/URI/id mappings must be reversible for any
 * input a backend can produce, cursors the gateway did not issue must be recognised, the
 * capability union must only announce what can be routed, and the stream helpers must keep
 * SSE events whole.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeCursor, encodeCursor } from '../../src/aggregate/cursor.js';
import { unionOfCapabilities } from '../../src/aggregate/initialize.js';
import { mergeStreams } from '../../src/aggregate/merged-stream.js';
import { qualifyId, qualifyName, qualifyUri, splitId, splitName, splitUri } from '../../src/aggregate/names.js';
import { messageToClient, responseToBackend, resultToClient } from '../../src/aggregate/rewrite.js';
import { routeOf } from '../../src/aggregate/request-routes.js';
import { decodeAggregateState, encodeAggregateState } from '../../src/aggregate/session-map.js';
import { transformSse } from '../../src/wire/sse.js';

describe('names', () => {
  test('tool names round-trip, including names that contain the separator themselves', () => {
    for (const name of ['echo', 'get__thing', '__leading', 'trailing__', 'ünïcode', '']) {
      assert.deepEqual(splitName(qualifyName('my-backend', name)), { backend: 'my-backend', value: name });
    }
    assert.equal(splitName('echo'), undefined);
    assert.equal(splitName('__echo'), undefined);
    assert.equal(splitName(42), undefined);
  });

  test('URIs round-trip, templates stay templates, and + inside a URI is kept', () => {
    for (const uri of ['file:///a+b.txt', 'demo://resource/{id}', 'https://x.test/?q=a+b', 'urn:isbn:0451450523']) {
      const qualified = qualifyUri('docs', uri);
      assert.deepEqual(splitUri(qualified), { backend: 'docs', value: uri });
    }
    assert.equal(qualifyUri('docs', 'demo://resource/{id}'), 'docs+demo://resource/{id}');
    assert.equal(splitUri('+file:///x'), undefined);
  });

  test('request ids keep their type through the round trip', () => {
    for (const id of [0, 7, -1, 'abc', 'has__separator', '"quoted"', '']) {
      assert.deepEqual(splitId(qualifyId('alpha', id)), { backend: 'alpha', value: id });
    }
    assert.equal(splitId('alpha__{"not":"an id"}'), undefined);
    assert.equal(splitId('alpha__not json'), undefined);
    assert.equal(splitId(12), undefined);
  });
});

describe('cursor', () => {
  test('decodes what it encoded, for backends of the session only', () => {
    const backends = ['alpha', 'beta'];
    assert.deepEqual(decodeCursor(encodeCursor({ backend: 'beta', cursor: 'p2' }), backends), { backend: 'beta', cursor: 'p2' });
    assert.deepEqual(decodeCursor(encodeCursor({ backend: 'alpha' }), backends), { backend: 'alpha' });
    assert.equal(decodeCursor(encodeCursor({ backend: 'gamma' }), backends), undefined);
  });

  test('refuses anything else', () => {
    const backends = ['alpha'];
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const bad of ['', 'not a cursor!', b64('alpha'), b64({ c: 'x' }), b64({ b: 'alpha', c: 5 }), b64(null), 'e30', 42, undefined]) {
      assert.equal(decodeCursor(bad, backends), undefined, `refused ${String(bad)}`);
    }
  });
});

describe('session map', () => {
  test('round-trips, stateless members included', () => {
    const map = { alpha: { sessionId: 'abc', protocolVersion: '2025-11-25', capabilities: ['tools'] }, beta: { sessionId: undefined, protocolVersion: '2025-06-18', capabilities: [] } };
    const state = { members: map, left: ['gamma'], clientInfo: { name: 'c', version: '1' }, announced: ['tools'] };
    assert.deepEqual(decodeAggregateState(encodeAggregateState(state)), state);
    assert.deepEqual(decodeAggregateState(undefined), { members: {}, left: [], announced: [] });
    // What sessions created before the state had fields hold: the member map alone.
    const older = Buffer.from(JSON.stringify({ alpha: { s: 'abc', v: '2025-11-25', c: ['tools'] } })).toString('base64url');
    assert.deepEqual(decodeAggregateState(older), { members: { alpha: map.alpha }, left: [], announced: [] });
    const olderWithM = Buffer.from(JSON.stringify({ m: { s: 'x', v: '2025-06-18', c: [] } })).toString('base64url');
    assert.deepEqual(decodeAggregateState(olderWithM).members, { m: { sessionId: 'x', protocolVersion: '2025-06-18', capabilities: [] } });
  });
});

describe('capability union', () => {
  test('offers what any member offers, flags or-ed, trees (tasks, extensions) merged, unroutable capabilities left out', () => {
    const union = unionOfCapabilities([
      { tools: { listChanged: false }, resources: { subscribe: true }, tasks: { list: {}, requests: { tools: { call: {} } } }, extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } },
      { tools: { listChanged: true }, prompts: {}, logging: {}, experimental: { x: {} }, tasks: { cancel: {}, requests: { sampling: { createMessage: {} } } } },
    ]);
    assert.deepEqual(union, {
      tools: { listChanged: true },
      resources: { subscribe: true },
      prompts: {},
      logging: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} }, sampling: { createMessage: {} } } },
      extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } },
    });
  });
});

describe('rewriting', () => {
  test('results: names and URIs get their prefix, nothing else changes', () => {
    assert.deepEqual(resultToClient('a', 'tools/list', { tools: [{ name: 'x', extra: 1 }], nextCursor: 'n' }), { tools: [{ name: 'a__x', extra: 1 }], nextCursor: 'n' });
    assert.deepEqual(resultToClient('a', 'resources/templates/list', { resourceTemplates: [{ uriTemplate: 'f://{p}' }] }), { resourceTemplates: [{ uriTemplate: 'a+f://{p}' }] });
    assert.deepEqual(
      resultToClient('a', 'tools/call', { content: [{ type: 'text', text: 'file://x' }, { type: 'resource_link', uri: 'file://x' }, { type: 'resource', resource: { uri: 'file://y', text: '' } }] }),
      { content: [{ type: 'text', text: 'file://x' }, { type: 'resource_link', uri: 'a+file://x' }, { type: 'resource', resource: { uri: 'a+file://y', text: '' } }] },
    );
    assert.deepEqual(resultToClient('a', 'completion/complete', { completion: { values: ['x'] } }), { completion: { values: ['x'] } });
  });

  test('backend requests get qualified ids, and the client answer finds its way back', () => {
    const request = messageToClient('beta', { jsonrpc: '2.0', id: 3, method: 'sampling/createMessage', params: {} }, () => undefined);
    assert.equal(request.id, 'beta__3');
    assert.deepEqual(responseToBackend({ jsonrpc: '2.0', id: request.id, result: { ok: true } }), { backend: 'beta', message: { jsonrpc: '2.0', id: 3, result: { ok: true } } });
    assert.equal(responseToBackend({ jsonrpc: '2.0', id: 3, result: {} }), undefined);
  });

  test('notifications: updated URIs and cancelled request ids are qualified; others untouched', () => {
    assert.deepEqual(messageToClient('b', { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'f://x' } }, () => undefined).params, { uri: 'b+f://x' });
    assert.deepEqual(messageToClient('b', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 4, reason: 'r' } }, () => undefined).params, { requestId: 'b__4', reason: 'r' });
    const progress = { jsonrpc: '2.0' as const, method: 'notifications/progress', params: { progressToken: 1, progress: 1 } };
    assert.equal(messageToClient('b', progress, () => undefined), progress);
    assert.deepEqual(messageToClient('b', { jsonrpc: '2.0', method: 'notifications/tasks/status', params: { taskId: 't1', status: 'working' } }, () => undefined).params, { taskId: 'b__t1', status: 'working' });
  });

  test('MCP Apps: resource URIs in _meta are qualified in tools, tool results and read contents; the rest of _meta is untouched', () => {
    const tool = { name: 'get-time', _meta: { ui: { resourceUri: 'ui://get-time/mcp-app.html', visibility: ['model'] }, 'ui/resourceUri': 'ui://get-time/mcp-app.html', 'openai/outputTemplate': 'ui://t.html' } };
    assert.deepEqual(resultToClient('apps', 'tools/list', { tools: [tool] }), {
      tools: [{ name: 'apps__get-time', _meta: { ui: { resourceUri: 'apps+ui://get-time/mcp-app.html', visibility: ['model'] }, 'ui/resourceUri': 'apps+ui://get-time/mcp-app.html', 'openai/outputTemplate': 'apps+ui://t.html' } }],
    });
    const csp = { connectDomains: ['https://api.example.com'] };
    assert.deepEqual(resultToClient('apps', 'resources/read', { contents: [{ uri: 'ui://get-time/mcp-app.html', mimeType: 'text/html;profile=mcp-app', text: '<html/>', _meta: { ui: { csp } } }] }), {
      contents: [{ uri: 'apps+ui://get-time/mcp-app.html', mimeType: 'text/html;profile=mcp-app', text: '<html/>', _meta: { ui: { csp } } }],
    });
    assert.deepEqual(resultToClient('apps', 'tools/call', { content: [], _meta: { 'ui/resourceUri': 'ui://x' } }), { content: [], _meta: { 'ui/resourceUri': 'apps+ui://x' } });
  });

  test('tasks: ids are qualified in CreateTaskResult, Task results, tasks/list and related-task _meta; tasks/* route by them', () => {
    assert.deepEqual(resultToClient('e', 'tools/call', { task: { taskId: 't1', status: 'working' } }), { task: { taskId: 'e__t1', status: 'working' } });
    assert.deepEqual(resultToClient('e', 'tasks/get', { taskId: 't1', status: 'completed' }), { taskId: 'e__t1', status: 'completed' });
    assert.deepEqual(resultToClient('e', 'tasks/list', { tasks: [{ taskId: 't1' }, { taskId: 't2' }], nextCursor: 'c' }), { tasks: [{ taskId: 'e__t1' }, { taskId: 'e__t2' }], nextCursor: 'c' });
    const related = { 'io.modelcontextprotocol/related-task': { taskId: 't1' } };
    assert.deepEqual(resultToClient('e', 'tasks/result', { content: [{ type: 'text', text: 'done' }], _meta: related }), { content: [{ type: 'text', text: 'done' }], _meta: { 'io.modelcontextprotocol/related-task': { taskId: 'e__t1' } } });
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const route = routeOf({ jsonrpc: '2.0', id: 1, method, params: { taskId: 'e__t1' } });
      assert.equal(route?.backend, 'e');
      assert.deepEqual(route?.message.params, { taskId: 't1' });
    }
    assert.equal(routeOf({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 'unqualified' } }), undefined);
  });
});

async function collect(source: AsyncIterable<Buffer>): Promise<string> {
  let text = '';
  for await (const chunk of source) text += chunk.toString('utf8');
  return text;
}

async function* chunks(...parts: string[]): AsyncGenerator<Buffer> {
  for (const part of parts) {
    await new Promise((r) => setImmediate(r));
    yield Buffer.from(part);
  }
}

describe('stream helpers', () => {
  test('transformSse rewrites events split across chunks (and multi-byte characters) and drops what it is told to', async () => {
    const euro = Buffer.from('€');
    async function* split(): AsyncGenerator<Buffer> {
      yield Buffer.from('id: 1\ndata: {"a":"');
      yield euro.subarray(0, 1);
      yield Buffer.concat([euro.subarray(1), Buffer.from('"}\n\n: keep-alive\n\nid: 2\ndata: drop\n\n')]);
    }
    const out = await collect(transformSse(split(), (data, id) => (data === 'drop' ? undefined : { data: data.toUpperCase(), id: `x:${id}` })));
    assert.equal(out, 'id: x:1\ndata: {"A":"€"}\n\n');
  });

  test('mergeStreams interleaves whole chunks and ends when every source has ended, even one that fails', async () => {
    async function* failing(): AsyncGenerator<Buffer> {
      yield Buffer.from('data: f\n\n');
      throw new Error('backend went away');
    }
    const out = await collect(mergeStreams([chunks('data: a1\n\n', 'data: a2\n\n'), chunks('data: b1\n\n'), failing()]));
    const events = out.split('\n\n').filter(Boolean).sort();
    assert.deepEqual(events, ['data: a1', 'data: a2', 'data: b1', 'data: f']);
  });
});
