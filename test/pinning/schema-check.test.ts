/**
 * The check of a call's arguments against a pinned `inputSchema` (issue 41 §4), alone:
 * patterns on RE2 (src/pinning/linear-regexp.ts), the worker thread and its deadline
 * (src/pinning/schema-check.ts, schema-worker.ts). The gateway around it:
 * schema-check.e2e.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { linearRegExp, UnsupportedPatternError } from '../../src/pinning/linear-regexp.js';
import { SchemaChecker } from '../../src/pinning/schema-check.js';
import { distinct } from '../../src/pinning/schema-worker.js';

const checker = new SchemaChecker(2_000);
after(() => checker.close());

const word = (pattern: string) => ({ type: 'object', properties: { word: { type: 'string', pattern } }, required: ['word'] });

describe('linearRegExp', () => {
  test('matches as ECMA-262 does for the usual patterns, in time linear in the input', () => {
    assert.equal(linearRegExp('^(a+)+$', 'u').test('aaaa'), true);
    assert.equal(linearRegExp('^(a+)+$', 'u').test(`${'a'.repeat(200_000)}!`), false);
    assert.equal(linearRegExp('b', 'u').test('abc'), true, 'unanchored, as JSON Schema patterns are');
    assert.equal(linearRegExp('^\\u0041\\d{2}$', 'u').test('A42'), true);
    assert.equal(linearRegExp('^(?<year>\\d{4})-\\p{L}+$', 'u').test('2026-été'), true);
    assert.equal(String(linearRegExp('^x$', 'u')), '^x$', 'ajv keys its patterns by this');
  });

  test('refuses what has no linear-time match, and what is not ECMA-262', () => {
    for (const pattern of ['(a)\\1', '(?<n>a)\\k<n>', '^(?!admin)', '(?<=a)b', '(a{1000}){1000}', '[', '\\p{Nope}']) {
      assert.throws(() => linearRegExp(pattern, 'u'), UnsupportedPatternError, pattern);
    }
    assert.doesNotThrow(() => linearRegExp('\\\\k', 'u'), 'an escaped backslash before k is no backreference');
  });
});

test('distinct: equal JSON values (key order aside) are duplicates, in one pass', () => {
  assert.equal(distinct([{ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }]), false);
  assert.equal(distinct([{ a: 1 }, { a: '1' }, [1], '[1]', null, 0]), true);
  const many = Array.from({ length: 50_000 }, (_, i) => ({ i }));
  assert.equal(distinct(many), true);
});

describe('SchemaChecker', () => {
  test('the backtracking pattern answers at once, invalid as it is', async () => {
    assert.match(String(await checker.check(word('^(a+)+$'), { word: `${'a'.repeat(40)}!` })), /must match pattern/);
    assert.equal(await checker.check(word('^(a+)+$'), { word: 'aaa' }), undefined);
  });

  test('a schema whose pattern the engine refuses refuses every call, never runs it backtracking', async () => {
    assert.match(String(await checker.check(word('^(a+)\\1$'), { word: 'aa' })), /cannot be checked: pattern "\^\(a\+\)\\\\1\$"/);
  });

  test('schemas with the same $id and different constraints each keep their own', async () => {
    const first = { $id: 'https://schemas.example/same.json', type: 'object', properties: { x: { type: 'string' } } };
    const second = { $id: 'https://schemas.example/same.json', type: 'object', properties: { x: { type: 'number' } } };
    assert.equal(await checker.check(first, { x: 'q' }), undefined);
    assert.equal(await checker.check(second, { x: 5 }), undefined);
    assert.match(String(await checker.check(second, { x: 'q' })), /must be number/);
    assert.match(String(await checker.check(first, { x: 5 })), /must be string/);
  });

  test('uniqueItems over a large array of objects is linear (ajv compares every pair: 2·10⁸ comparisons here)', async () => {
    const items = Array.from({ length: 20_000 }, (_, i) => ({ i }));
    assert.equal(await checker.check({ type: 'array', uniqueItems: true }, items), undefined);
    assert.match(String(await checker.check({ type: 'array', uniqueItems: true }, [...items, { i: 7 }])), /uniqueItems/);
  });

  test('a check past its deadline is refused, and the checks behind it run on a fresh worker', async () => {
    const branch = (value: number) => ({ allOf: [{ properties: { a: { $ref: '#' } } }, { const: value }] });
    const deep = { $id: 'https://schemas.example/deep.json', anyOf: [branch(1), branch(2), { type: 'object', maxProperties: 0 }] };
    let nested: Record<string, unknown> = {};
    for (let i = 0; i < 40; i++) nested = { a: nested };
    const [slow, next] = await Promise.all([checker.check(deep, nested), checker.check(word('^a+$'), { word: 'b' })]);
    assert.match(String(slow), /did not finish within 2000 ms/);
    assert.match(String(next), /must match pattern/);
    assert.equal(await checker.check(deep, {}), undefined);
  });
});
