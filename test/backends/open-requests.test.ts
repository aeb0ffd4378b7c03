/**
 * How the bridge picks the HTTP stream for a message from a stdio or legacy SSE backend
 * (src/backends/bridge/open-requests.ts): responses by id, progress by the token the
 * client request set, the sole open request otherwise, else the standalone GET stream.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { OpenRequests } from '../../src/backends/bridge/open-requests.js';

const progress = (progressToken: string | number): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken, progress: 1 } });
const sampling: JSONRPCMessage = { jsonrpc: '2.0', id: 0, method: 'sampling/createMessage', params: { messages: [], maxTokens: 1 } };
const log: JSONRPCMessage = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } };

describe('OpenRequests.relate', () => {
  test('responses route by their own id', () => {
    const open = new OpenRequests();
    assert.equal(open.relate({ jsonrpc: '2.0', id: 7, result: {} }), 7);
    assert.equal(open.relate({ jsonrpc: '2.0', id: 'a', error: { code: -1, message: 'no' } }), 'a');
  });

  test('progress goes to the request that set its token, among several open ones', () => {
    const open = new OpenRequests();
    open.opened(1, { _meta: { progressToken: 'tok-1' } });
    open.opened(2, { _meta: { progressToken: 2 } });
    open.opened('3', {});
    assert.equal(open.relate(progress('tok-1')), 1);
    assert.equal(open.relate(progress(2)), 2);
    // Token 2 (a number) is not the token "2" (a string).
    assert.equal(open.relate(progress('2')), undefined);
    // A server→client request carrying a token in _meta follows it too.
    assert.equal(open.relate({ ...sampling, params: { messages: [], maxTokens: 1, _meta: { progressToken: 'tok-1' } } } as JSONRPCMessage), 1);
  });

  test('with one open request, unrelated messages go with it; with none or several, to the GET stream', () => {
    const open = new OpenRequests();
    assert.equal(open.relate(sampling), undefined);
    open.opened(5, {});
    assert.equal(open.relate(sampling), 5);
    assert.equal(open.relate(log), 5);
    open.opened(6, {});
    assert.equal(open.relate(sampling), undefined);
    open.closed(5);
    assert.equal(open.relate(log), 6);
    open.closed(6);
    assert.equal(open.size, 0);
    assert.equal(open.relate(log), undefined);
  });

  test('an answered request forgets its progress token; ids are kept by type', () => {
    const open = new OpenRequests();
    open.opened(1, { _meta: { progressToken: 't' } });
    open.opened('1', {});
    assert.deepEqual(open.ids().sort(), [1, '1'].sort());
    open.closed(1);
    assert.equal(open.has(1), false);
    assert.equal(open.has('1'), true);
    assert.equal(open.relate(progress('t')), '1', 'falls back to the sole open request');
  });
});
