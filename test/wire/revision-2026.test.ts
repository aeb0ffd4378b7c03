/**
 * The 2026-07-28 vocabulary (src/wire/revision-2026.ts): how one endpoint picks the era of a
 * request (basic/versioning §Backward Compatibility; issue 15), and the method lists against
 * the changelog and the schema reference.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';
import { ErrorCode } from '../../src/wire/jsonrpc.js';
import { EXTENSION_METHODS, META, metaOf, nameFieldOf, REMOVED_IN_2026, requestEra, standardHeadersOf, STATELESS_METHODS, STATELESS_REVISION, STATELESS_REVISIONS } from '../../src/wire/revision-2026.js';

function call(method: string, meta?: Record<string, unknown>): JsonRpcMessage {
  return { jsonrpc: '2.0', id: 1, method, params: meta === undefined ? {} : { _meta: meta } };
}

const modern = { [META.protocolVersion]: '2026-07-28', [META.clientCapabilities]: {} };

describe('requestEra', () => {
  test('the 2026 header with _meta is stateless; so is the 2026 header alone (it gets -32602, not a legacy answer)', () => {
    assert.equal(requestEra('2026-07-28', call('tools/list', modern)), 'stateless');
    assert.equal(requestEra('2026-07-28', call('tools/list')), 'stateless');
    assert.equal(requestEra('2026-07-28'), 'stateless', 'a GET or DELETE with the 2026 header (405)');
  });

  test('initialize without the 2026 header or _meta is legacy, with a legacy header or none', () => {
    const init: JsonRpcMessage = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } };
    assert.equal(requestEra(undefined, init), 'legacy');
    assert.equal(requestEra('2025-11-25', init), 'legacy');
    assert.equal(requestEra('2025-06-18', call('tools/list')), 'legacy');
    assert.equal(requestEra(undefined), 'legacy');
    assert.equal(requestEra('2024-11-05', call('tools/list')), 'legacy');
  });

  test('initialize with the 2026 header is stateless (the removed method gets 404 -32601)', () => {
    assert.equal(requestEra('2026-07-28', call('initialize', modern)), 'stateless');
    assert.equal(requestEra('2026-07-28', call('initialize')), 'stateless');
  });

  test('a 2026 _meta decides even beside a legacy header or none (a -32020 mismatch follows, not legacy service)', () => {
    assert.equal(requestEra('2025-11-25', call('tools/list', modern)), 'stateless');
    assert.equal(requestEra(undefined, call('tools/list', modern)), 'stateless');
    assert.equal(requestEra(undefined, call('tools/list', { [META.protocolVersion]: 42 })), 'stateless', 'a malformed claim is still a claim (-32602)');
  });

  test('a _meta naming a legacy revision is no claim: the header decides', () => {
    const legacyClaim = { [META.protocolVersion]: '2025-11-25' };
    assert.equal(requestEra(undefined, call('tools/list', legacyClaim)), 'legacy');
    assert.equal(requestEra('2025-11-25', call('tools/list', legacyClaim)), 'legacy');
    assert.equal(requestEra('2026-07-28', call('tools/list', legacyClaim)), 'stateless');
  });

  test('an unknown revision, future or past, is stateless, so it gets -32022 with the served list', () => {
    assert.equal(requestEra('2027-01-01', call('tools/list')), 'stateless');
    assert.equal(requestEra('v999.0.0', call('server/discover', { ...modern, [META.protocolVersion]: 'v999.0.0' })), 'stateless');
    assert.equal(requestEra('1900-01-01', call('tools/list')), 'stateless');
  });

  test('whitespace around the header is not part of it; an empty header is none', () => {
    assert.equal(requestEra(' 2025-11-25 ', call('tools/list')), 'legacy');
    assert.equal(requestEra('\t2026-07-28 ', call('tools/list')), 'stateless');
    assert.equal(requestEra('', call('tools/list')), 'legacy');
  });

  test('params that are not an object carry no claim', () => {
    assert.equal(requestEra(undefined, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: [modern] }), 'legacy');
    assert.equal(requestEra(undefined, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: [modern] } }), 'legacy');
  });
});

describe('metaOf', () => {
  test('params._meta when both are objects, else undefined', () => {
    assert.deepEqual(metaOf(call('tools/list', modern)), modern);
    assert.equal(metaOf(call('tools/list')), undefined);
    assert.equal(metaOf({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: [modern] } }), undefined);
    assert.equal(metaOf({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: 'x' } }), undefined);
    assert.equal(metaOf({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: [{ _meta: modern }] }), undefined);
    assert.equal(metaOf(undefined), undefined);
  });
});

describe('the 2026-07-28 vocabulary', () => {
  test('revisions and error codes', () => {
    assert.equal(STATELESS_REVISION, '2026-07-28');
    assert.deepEqual([...STATELESS_REVISIONS], ['2026-07-28']);
    assert.equal(ErrorCode.HeaderMismatch, -32020);
    assert.equal(ErrorCode.MissingRequiredClientCapability, -32021);
    assert.equal(ErrorCode.UnsupportedProtocolVersion, -32022);
  });

  test('the client→server methods of the schema reference, and what the changelog removed', () => {
    const requests = ['server/discover', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list', 'resources/read', 'resources/templates/list', 'completion/complete', 'subscriptions/listen'];
    assert.deepEqual([...STATELESS_METHODS].sort(), [...requests, 'notifications/cancelled'].sort());
    for (const removed of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'notifications/initialized', 'notifications/roots/list_changed', 'tasks/list', 'tasks/result']) {
      assert.ok(REMOVED_IN_2026.has(removed), removed);
    }
    for (const method of STATELESS_METHODS) assert.ok(!REMOVED_IN_2026.has(method), method);
    for (const method of EXTENSION_METHODS) assert.ok(!REMOVED_IN_2026.has(method) && !STATELESS_METHODS.has(method), method);
  });

  test('Mcp-Name mirrors params.name, params.uri or params.taskId', () => {
    assert.equal(nameFieldOf('tools/call'), 'name');
    assert.equal(nameFieldOf('prompts/get'), 'name');
    assert.equal(nameFieldOf('resources/read'), 'uri');
    assert.equal(nameFieldOf('tasks/get'), 'taskId');
    assert.equal(nameFieldOf('tools/list'), undefined);
    assert.equal(nameFieldOf('completion/complete'), undefined);
  });

  test('the reserved _meta keys', () => {
    assert.deepEqual(Object.values(META).sort(), [
      'io.modelcontextprotocol/clientCapabilities',
      'io.modelcontextprotocol/clientInfo',
      'io.modelcontextprotocol/logLevel',
      'io.modelcontextprotocol/protocolVersion',
      'io.modelcontextprotocol/serverInfo',
      'io.modelcontextprotocol/subscriptionId',
    ]);
  });
});

describe('standardHeadersOf (headers a WebSocket message implies)', () => {
  const meta = { [META.protocolVersion]: STATELESS_REVISION, [META.clientCapabilities]: {} };
  test('a stateless message: its revision, method and name, the name encoded where it must be', () => {
    assert.deepEqual(standardHeadersOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', _meta: meta } }), {
      'mcp-protocol-version': STATELESS_REVISION,
      'mcp-method': 'tools/call',
      'mcp-name': 'echo',
    });
    assert.equal(standardHeadersOf({ jsonrpc: '2.0', id: 2, method: 'resources/read', params: { uri: 'file:///ünï', _meta: meta } })?.['mcp-name']?.startsWith('=?base64?'), true);
    assert.deepEqual(standardHeadersOf({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: meta } }), { 'mcp-protocol-version': STATELESS_REVISION, 'mcp-method': 'tools/list' });
  });
  test('a legacy message or one without _meta: none', () => {
    assert.equal(standardHeadersOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo' } }), undefined);
    assert.equal(standardHeadersOf({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', _meta: { [META.protocolVersion]: '2025-11-25' } } }), undefined);
  });
});
