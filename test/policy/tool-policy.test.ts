/**
 * Tool allow/deny lists (src/policy/tool-policy.ts) and their application to backend answers
 * (src/policy/tool-traffic.ts applyToolPolicy): wildcards, deny wins, tools/list results
 * filtered in JSON and SSE bodies with every other message and event id left alone, and the
 * errors for a batch's hidden calls added to the answer.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { parseConfig } from '../../src/config/load.js';
import type { BackendConfig } from '../../src/config/schema.js';
import { filterToolsResult, hasToolPolicy, isToolAllowed, patternToRegExp } from '../../src/policy/tool-policy.js';
import { applyToolPolicy } from '../../src/policy/tool-traffic.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

function backend(tools?: { allow?: string[]; deny?: string[] }): BackendConfig {
  return parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'fs', url: 'http://127.0.0.1:9999/mcp', ...(tools ? { access: { tools } } : {}) }],
  }).backends[0]!;
}

const tool = (name: string) => ({ name, description: `does ${name}`, inputSchema: { type: 'object' } });

describe('isToolAllowed', () => {
  test('no lists: everything allowed, no policy', () => {
    const b = backend();
    assert.equal(hasToolPolicy(b), false);
    assert.equal(isToolAllowed(b, 'anything'), true);
  });

  test('an allow list admits only what it matches', () => {
    const b = backend({ allow: ['read_*', 'echo'] });
    assert.equal(hasToolPolicy(b), true);
    assert.equal(isToolAllowed(b, 'echo'), true);
    assert.equal(isToolAllowed(b, 'read_file'), true);
    assert.equal(isToolAllowed(b, 'read_'), true, '* matches nothing too');
    assert.equal(isToolAllowed(b, 'echo2'), false, 'patterns are anchored');
    assert.equal(isToolAllowed(b, 'xread_file'), false);
    assert.equal(isToolAllowed(b, 'Echo'), false, 'case-sensitive');
  });

  test('deny wins over allow', () => {
    const b = backend({ allow: ['*'], deny: ['*_delete', 'admin-*'] });
    assert.equal(isToolAllowed(b, 'file_read'), true);
    assert.equal(isToolAllowed(b, 'file_delete'), false);
    assert.equal(isToolAllowed(b, 'admin-reset'), false);
    const both = backend({ allow: ['echo'], deny: ['echo'] });
    assert.equal(isToolAllowed(both, 'echo'), false);
  });

  test('a deny list alone hides only what it matches', () => {
    const b = backend({ deny: ['get-*'] });
    assert.equal(isToolAllowed(b, 'echo'), true);
    assert.equal(isToolAllowed(b, 'get-sum'), false);
  });

  test('regular-expression characters in patterns are literal', () => {
    const re = patternToRegExp('a.b+(c)?[d]{1}|e^$\\');
    assert.equal(re.test('a.b+(c)?[d]{1}|e^$\\'), true);
    assert.equal(re.test('axbb(c)[d]{1}|e^$\\'), false);
    assert.equal(patternToRegExp('*').test('multi\nline'), true);
    assert.equal(patternToRegExp('a*b*c').test('a--b--c'), true);
  });

  test('wildcards match as globs do, in time linear in the name (issue 41 §4)', () => {
    const cases: Array<[string, string, boolean]> = [
      ['*', '', true],
      ['a*', 'a', true],
      ['*a', 'ba', true],
      ['a*a', 'a', false],
      ['a*a', 'aa', true],
      ['*_x_*', 'get_x_', true],
      ['*_x_*', 'get_y_', false],
      ['a*b*c', 'abcbc', true],
      ['a*b*c', 'acb', false],
      ['**', 'anything', true],
      ['delete_*', 'delete_', true],
      ['exact', 'exact', true],
      ['exact', 'exactly', false],
    ];
    for (const [pattern, name, expected] of cases) assert.equal(patternToRegExp(pattern).test(name), expected, `${pattern} ~ ${name}`);
    // Cubic for a backtracking RegExp (^.*_.*_.*x$): 29 s for 4,000 underscores; here one pass.
    assert.equal(patternToRegExp('*_*_*_x').test('_'.repeat(1_000_000)), false);
  });
});

describe('filterToolsResult', () => {
  test('removes hidden tools and keeps the rest of the result', () => {
    const b = backend({ deny: ['get-*'] });
    const result = { tools: [tool('echo'), tool('get-sum'), tool('get-env')], nextCursor: 'c2', _meta: { x: 1 } };
    assert.deepEqual(filterToolsResult(b, result), { tools: [tool('echo')], nextCursor: 'c2', _meta: { x: 1 } });
    assert.equal(result.tools.length, 3, 'the input is not modified');
  });

  test('returns the same object when nothing is hidden or there is no policy', () => {
    const result = { tools: [tool('echo')] };
    assert.equal(filterToolsResult(backend({ deny: ['x'] }), result), result);
    const unfiltered = { tools: [tool('x')] };
    assert.equal(filterToolsResult(backend(), unfiltered), unfiltered);
  });

  test('odd results pass unchanged; nameless tools count as ""', () => {
    const b = backend({ allow: ['echo'] });
    for (const odd of [null, 'x', [1], {}, { tools: 'no' }]) assert.equal(filterToolsResult(b, odd), odd);
    assert.deepEqual(filterToolsResult(b, { tools: [{ description: 'nameless' }, tool('echo'), 7] }), { tools: [tool('echo')] });
  });
});

function response(contentType: string, body: string, status = 200): BackendResponse {
  return { status, headers: { 'content-type': contentType, 'content-length': String(body.length) }, contentType, body: syntheticBody(body) };
}

function sseEvents(text: string): Array<{ id?: string; data: string }> {
  const events: Array<{ id?: string; data: string }> = [];
  const parser = createParser({ onEvent: (e) => events.push({ ...(e.id !== undefined ? { id: e.id } : {}), data: e.data }) });
  parser.feed(text);
  return events;
}

const listRequest = (id: number | string): JsonRpcMessage => ({ jsonrpc: '2.0', id, method: 'tools/list', params: {} });
const callRequest = (id: number, name: string): JsonRpcMessage => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });

describe('applyToolPolicy', () => {
  const policy = backend({ deny: ['get-*'] });
  const listed = { tools: [tool('echo'), tool('get-sum')] };

  test('without a policy, or without tools/list, the response is untouched', () => {
    const res = response('application/json', '{}');
    assert.equal(applyToolPolicy(backend(), [listRequest(1)], res), res);
    assert.equal(applyToolPolicy(policy, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], res), res);
    const failed = response('application/json', '{}', 500);
    assert.equal(applyToolPolicy(policy, [listRequest(1)], failed), failed);
  });

  test('a JSON answer: the matching response is filtered, content-length dropped', async () => {
    const res = applyToolPolicy(policy, [listRequest(7)], response('application/json', JSON.stringify({ jsonrpc: '2.0', id: 7, result: listed })));
    assert.equal(res.headers['content-length'], undefined);
    assert.deepEqual(JSON.parse(await res.body.text()), { jsonrpc: '2.0', id: 7, result: { tools: [tool('echo')] } });
  });

  test('ids match by type: an answer under 7 for the request "7" is refused, never relayed unfiltered (issue 41 §1)', async () => {
    const res = applyToolPolicy(policy, [listRequest('7')], response('application/json', JSON.stringify({ jsonrpc: '2.0', id: 7, result: listed })));
    const answer = JSON.parse(await res.body.text());
    assert.equal(answer.id, '7');
    assert.equal(answer.error.code, -32010);
    assert.equal(answer.result, undefined);
  });

  test('a JSON batch answer: only the tools/list response changes; hidden calls get errors', async () => {
    const backendAnswer = [
      { jsonrpc: '2.0', id: 1, result: listed },
      { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'hi' }] } },
    ];
    const res = applyToolPolicy(policy, [listRequest(1), callRequest(2, 'echo'), callRequest(3, 'get-sum')], response('application/json', JSON.stringify(backendAnswer)));
    assert.deepEqual(JSON.parse(await res.body.text()), [
      { jsonrpc: '2.0', id: 1, result: { tools: [tool('echo')] } },
      backendAnswer[1],
      { jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Unknown tool: get-sum' } },
    ]);
  });

  test('202 for the rest of a batch becomes the hidden calls\' errors', async () => {
    const res = applyToolPolicy(policy, [{ jsonrpc: '2.0', method: 'notifications/initialized' }, callRequest(4, 'get-env')], response('application/json', '', 202));
    assert.equal(res.status, 200);
    assert.equal(res.contentType, 'application/json');
    assert.deepEqual(JSON.parse(await res.body.text()), [{ jsonrpc: '2.0', id: 4, error: { code: -32602, message: 'Unknown tool: get-env' } }]);
  });

  test('a list answer that is not JSON is refused with -32010, not passed as sent (issue 41 §1)', async () => {
    const res = applyToolPolicy(policy, [listRequest(1)], response('application/json', 'not json'));
    assert.deepEqual(JSON.parse(await res.body.text()), { jsonrpc: '2.0', id: 1, error: { code: -32010, message: 'backend "fs" sent an answer the gateway cannot judge (a body that is not JSON); refused, not relayed', data: { backend: 'fs', reason: 'protocol', unreadable: 'a body that is not JSON' } } });
  });

  test('an SSE answer: other events and every event id pass unchanged', async () => {
    const progress = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
    const other = JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'sampling/createMessage', params: {} });
    const answer = JSON.stringify({ jsonrpc: '2.0', id: 5, result: listed });
    const wire = `id: p0\nretry: 1000\ndata: \n\nid: e1\nevent: message\ndata: ${progress}\n\nid: e2\ndata: ${other}\n\nid: e3\ndata: ${answer}\n\n`;
    const res = applyToolPolicy(policy, [listRequest(5)], response('text/event-stream', wire));
    assert.equal(res.contentType, 'text/event-stream');
    assert.deepEqual(sseEvents(await res.body.text()), [
      { id: 'p0', data: '' },
      { id: 'e1', data: progress },
      { id: 'e2', data: other },
      { id: 'e3', data: JSON.stringify({ jsonrpc: '2.0', id: 5, result: { tools: [tool('echo')] } }) },
    ]);
  });

  test('an SSE answer to a batch starts with the hidden calls\' errors', async () => {
    const wire = `id: e1\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [] } })}\n\n`;
    const res = applyToolPolicy(policy, [callRequest(1, 'echo'), callRequest(2, 'get-sum')], response('text/event-stream', wire));
    const events = sseEvents(await res.body.text());
    assert.deepEqual(events.map((e) => JSON.parse(e.data).id), [2, 1]);
    assert.equal(events[0]!.id, undefined, 'the gateway gives its own events no backend id');
    assert.equal(events[1]!.id, 'e1');
  });
});
