/**
 * The Base64 sentinel of MCP 2026-07-28 Transports §Value Encoding (src/wire/header-encoding.ts):
 * the spec's own example table, the values a client MUST encode and those it must not, and the
 * malformed sentinels the SEP-2243 conformance table says a server rejects.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeHeaderValue, encodeHeaderValue } from '../../src/wire/header-encoding.js';

describe('header value encoding', () => {
  test('the spec table: plain ASCII as it is, the rest as a sentinel', () => {
    assert.equal(encodeHeaderValue('us-west1'), 'us-west1');
    assert.equal(encodeHeaderValue('Hello, 世界'), '=?base64?SGVsbG8sIOS4lueVjA==?=');
    assert.equal(encodeHeaderValue(' padded '), '=?base64?IHBhZGRlZCA=?=');
    assert.equal(encodeHeaderValue('line1\nline2'), '=?base64?bGluZTEKbGluZTI=?=');
    assert.equal(encodeHeaderValue('=?base64?literal?='), '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=');
  });

  test('a single leading or trailing space, a tab, DEL or a Latin-1 letter is encoded; inner spaces are not', () => {
    assert.equal(encodeHeaderValue(' lead'), '=?base64?IGxlYWQ=?=');
    assert.equal(encodeHeaderValue('trail '), '=?base64?dHJhaWwg?=');
    assert.match(encodeHeaderValue('a\tb'), /^=\?base64\?.*\?=$/);
    assert.match(encodeHeaderValue('a\x7fb'), /^=\?base64\?.*\?=$/);
    assert.match(encodeHeaderValue('café'), /^=\?base64\?.*\?=$/);
    assert.equal(encodeHeaderValue('get weather now'), 'get weather now');
    assert.equal(encodeHeaderValue('file:///a/b?x=1#frag'), 'file:///a/b?x=1#frag');
    assert.equal(encodeHeaderValue(''), '');
  });

  test('plain text that only starts or only ends like a sentinel stays plain; the overlapping "=?base64?=" is encoded', () => {
    assert.equal(encodeHeaderValue('=?base64?abc'), '=?base64?abc');
    assert.equal(encodeHeaderValue('abc?='), 'abc?=');
    assert.notEqual(encodeHeaderValue('=?base64?='), '=?base64?=');
    assert.equal(decodeHeaderValue(encodeHeaderValue('=?base64?=')), '=?base64?=');
  });

  test('what is encoded decodes back, astral characters included', () => {
    for (const value of ['Hello, 世界', ' padded ', 'line1\nline2', '=?base64?literal?=', '😀 emoji', '\t', 'x '.repeat(50)]) {
      assert.equal(decodeHeaderValue(encodeHeaderValue(value)), value);
    }
  });

  test('a value without the prefix or without the suffix is literal text', () => {
    assert.equal(decodeHeaderValue('SGVsbG8='), 'SGVsbG8=');
    assert.equal(decodeHeaderValue('=?base64?SGVsbG8='), '=?base64?SGVsbG8=');
    assert.equal(decodeHeaderValue('SGVsbG8=?='), 'SGVsbG8=?=');
    assert.equal(decodeHeaderValue('=?BASE64?SGVsbG8=?='), '=?BASE64?SGVsbG8=?=', 'the markers are case-sensitive');
    assert.equal(decodeHeaderValue('=?base64?='), '=?base64?=', 'prefix and suffix may not overlap');
  });

  test('a sentinel decodes; the empty one is the empty string', () => {
    assert.equal(decodeHeaderValue('=?base64?SGVsbG8=?='), 'Hello');
    assert.equal(decodeHeaderValue('=?base64??='), '');
  });

  test('malformed sentinels are undefined: missing padding, foreign characters, URL alphabet, stray bits, not UTF-8', () => {
    assert.equal(decodeHeaderValue('=?base64?SGVsbG8?='), undefined, 'missing padding (conformance: ServerRejectsInvalidBase64Padding)');
    assert.equal(decodeHeaderValue('=?base64?SGVs!!!bG8=?='), undefined, 'conformance: ServerRejectsInvalidBase64Chars');
    assert.equal(decodeHeaderValue('=?base64?_-8=?='), undefined, 'base64url is not the standard alphabet');
    assert.equal(decodeHeaderValue('=?base64?SGVsbG9=?='), undefined, 'non-zero padding bits');
    assert.equal(decodeHeaderValue('=?base64?SGVs bG8=?='), undefined, 'inner space');
    assert.equal(decodeHeaderValue('=?base64?/w==?='), undefined, 'byte 0xff is not UTF-8');
  });
});
