/**
 * Span names and attributes by the MCP semantic conventions (src/telemetry/mcp-attributes.ts):
 * `{mcp.method.name} {target}` with the tool or prompt as target, never the resource URI;
 * `gen_ai.operation.name` on tools/call only; no `jsonrpc.request.id` for a null id;
 * `error.type` from the JSON-RPC code or `tool_error`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cappedJson, describeMessage, metricAttributes, responseError, serverOf } from '../../src/telemetry/mcp-attributes.js';
import { SpanAttributes } from '../../src/telemetry/span-attributes.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

/** describeMessage with its attributes as an object. */
function described(m: JsonRpcMessage): { name: string; attributes: Record<string, unknown> } {
  const { name, attributes } = describeMessage(m);
  return { name, attributes: attributes.toObject() };
}

test('names and attributes of requests and notifications', () => {
  assert.deepEqual(described({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'get-weather' } }), {
    name: 'tools/call get-weather',
    attributes: { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'get-weather', 'gen_ai.operation.name': 'execute_tool', 'jsonrpc.request.id': '3' },
  });
  assert.deepEqual(described({ jsonrpc: '2.0', id: 'p', method: 'prompts/get', params: { name: 'analyze-code' } }), {
    name: 'prompts/get analyze-code',
    attributes: { 'mcp.method.name': 'prompts/get', 'gen_ai.prompt.name': 'analyze-code', 'jsonrpc.request.id': 'p' },
  });
  assert.deepEqual(described({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'file:///a.txt' } }), {
    name: 'resources/read',
    attributes: { 'mcp.method.name': 'resources/read', 'mcp.resource.uri': 'file:///a.txt', 'jsonrpc.request.id': '1' },
  });
  assert.deepEqual(described({ jsonrpc: '2.0', method: 'notifications/initialized' }), { name: 'notifications/initialized', attributes: { 'mcp.method.name': 'notifications/initialized' } });
  assert.deepEqual(described({ jsonrpc: '2.0', id: null, method: 'ping' }).attributes, { 'mcp.method.name': 'ping' });
});

test('error.type: the JSON-RPC code, or tool_error for isError; none for a success', () => {
  assert.deepEqual(responseError({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Unknown tool' } }), { type: '-32602', statusCode: '-32602', message: 'Unknown tool' });
  assert.deepEqual(responseError({ jsonrpc: '2.0', id: 1, result: { content: [], isError: true } }), { type: 'tool_error' });
  assert.equal(responseError({ jsonrpc: '2.0', id: 1, result: { content: [] } }), undefined);
});

test('metrics keep the low-cardinality attributes only; content is capped; server address from the URL', () => {
  assert.deepEqual(metricAttributes(SpanAttributes.of({ 'mcp.method.name': 'tools/call', 'mcp.session.id': 's', 'jsonrpc.request.id': '1', 'mcp.resource.uri': 'x', 'client.address': '10.0.0.1', 'error.type': 'tool_error' })), {
    'mcp.method.name': 'tools/call',
    'error.type': 'tool_error',
  });
  assert.equal(cappedJson({ a: 'x'.repeat(100) }, 64), `${JSON.stringify({ a: 'x'.repeat(100) }).slice(0, 64)}…[truncated]`);
  assert.equal(cappedJson({ a: 1 }, 64), '{"a":1}');
  assert.deepEqual(serverOf('https://hr.example.com/mcp'), { 'server.address': 'hr.example.com', 'server.port': 443 });
  assert.deepEqual(serverOf('http://[::1]:8080/mcp'), { 'server.address': '::1', 'server.port': 8080 });
});

test('span names made of alternating methods and targets are each their own', () => {
  const calls: Array<[string, string]> = [['tools/call', 'a'], ['tools/call', 'a'], ['tools/call', 'b'], ['prompts/get', 'b'], ['tools/call', 'b'], ['tools/call', 'a b'], ['tools/call', 'a']];
  for (const [method, target] of [...calls, ...calls.reverse()]) {
    assert.equal(describeMessage({ jsonrpc: '2.0', id: 1, method, params: { name: target } }).name, `${method} ${target}`);
  }
  assert.equal(describeMessage({ jsonrpc: '2.0', id: 1, method: 'tools/list' }).name, 'tools/list');
});
