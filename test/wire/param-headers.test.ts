/**
 * wire/param-headers.ts against MCP 2026-07-28 Transports §Custom Headers from Tool Parameters:
 * which `x-mcp-header` marks make a tool invalid (§Schema Extension), and the headers of one
 * call's arguments (§Value Encoding, the spec's own examples).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { paramHeadersOf, scanParamHeaders } from '../../src/wire/param-headers.js';

const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, ...extra });
const str = (name: string) => ({ type: 'string', 'x-mcp-header': name });

function invalid(schema: unknown, reason: RegExp): void {
  const scan = scanParamHeaders(schema);
  assert.equal(scan.valid, false, JSON.stringify(schema));
  if (!scan.valid) assert.match(scan.reason, reason);
}

describe('scanParamHeaders', () => {
  test('a schema without marks, or no schema, has none', () => {
    assert.deepEqual(scanParamHeaders(obj({ q: { type: 'string' } })), { valid: true, headers: [] });
    assert.deepEqual(scanParamHeaders(undefined), { valid: true, headers: [] });
  });

  test('marks at the top and through nested properties, with their paths', () => {
    const scan = scanParamHeaders(obj({ region: str('Region'), opts: obj({ limit: { type: 'integer', 'x-mcp-header': 'Limit' }, on: { type: 'boolean', 'x-mcp-header': 'On' } }) }));
    assert.deepEqual(scan, { valid: true, headers: [{ path: ['region'], name: 'Region' }, { path: ['opts', 'limit'], name: 'Limit' }, { path: ['opts', 'on'], name: 'On' }] });
  });

  test('each broken rule makes the tool invalid, said by path', () => {
    invalid(obj({ a: { type: 'number', 'x-mcp-header': 'A' } }), /^a: .*string, integer or boolean.*"number"/);
    invalid(obj({ a: { type: ['string', 'null'], 'x-mcp-header': 'A' } }), /string, integer or boolean/);
    invalid(obj({ a: { type: 'object', 'x-mcp-header': 'A' } }), /string, integer or boolean/);
    invalid(obj({ a: { type: 'string', 'x-mcp-header': '' } }), /non-empty string/);
    invalid(obj({ a: { type: 'string', 'x-mcp-header': 7 } }), /non-empty string/);
    invalid(obj({ a: str('Two Words') }), /not an HTTP token/);
    invalid(obj({ a: str('Line\r\nX') }), /not an HTTP token/);
    invalid(obj({ a: str('Region'), b: str('region') }), /^b: .*not unique ignoring case \(also "Region"\)/);
    invalid(obj({ list: { type: 'array', items: str('Item') } }), /^list\.<items>: .*reached through "properties" alone/);
    invalid(obj({}, { anyOf: [obj({ a: str('A') })] }), /<anyOf>\.a/);
    invalid(obj({}, { $defs: { d: obj({ a: str('A') }) } }), /<\$defs>\.a/);
    invalid(obj({ m: { type: 'object', additionalProperties: str('A') } }), /m\.<additionalProperties>/);
    invalid({ type: 'string', 'x-mcp-header': 'Root' }, /^<root>:/);
  });
});

describe('paramHeadersOf', () => {
  const marks = [
    { path: ['region'], name: 'Region' },
    { path: ['opts', 'limit'], name: 'Limit' },
    { path: ['opts', 'on'], name: 'On' },
  ];

  test('string as is, integer in decimal, boolean lower case; names lower-cased', () => {
    assert.deepEqual(paramHeadersOf(marks, { region: 'us-west1', opts: { limit: -7, on: true } }), { 'mcp-param-region': 'us-west1', 'mcp-param-limit': '-7', 'mcp-param-on': 'true' });
    assert.deepEqual(paramHeadersOf(marks, { opts: { on: false } }), { 'mcp-param-on': 'false' });
  });

  test('the spec\'s encoding examples', () => {
    const one = (value: string) => paramHeadersOf([{ path: ['v'], name: 'V' }], { v: value })['mcp-param-v'];
    assert.equal(one('Hello, 世界'), '=?base64?SGVsbG8sIOS4lueVjA==?=');
    assert.equal(one(' padded '), '=?base64?IHBhZGRlZCA=?=');
    assert.equal(one('line1\nline2'), '=?base64?bGluZTEKbGluZTI=?=');
    assert.equal(one('=?base64?literal?='), '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=');
  });

  test('absent, null, or a value no header can carry: no header', () => {
    assert.deepEqual(paramHeadersOf(marks, {}), {});
    assert.deepEqual(paramHeadersOf(marks, { region: null, opts: null }), {});
    assert.deepEqual(paramHeadersOf(marks, { region: { nested: 1 }, opts: { limit: 2 ** 53, on: [true] } }), {});
    assert.deepEqual(paramHeadersOf(marks, undefined), {});
    assert.deepEqual(paramHeadersOf([{ path: ['toString'], name: 'T' }], {}), {}, 'inherited members are not arguments');
  });
});
