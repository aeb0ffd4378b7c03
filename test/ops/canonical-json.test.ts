/**
 * RFC 8785 canonical JSON (src/ops/canonical-json.ts): the audit's argument hash, the pins'
 * fingerprints and the policy version are taken of it, so its text must not depend on which
 * way it was written. `JSON.stringify` is used for a value whose members are in order already;
 * here every value is checked against the plain definition (members sorted at every level,
 * written one by one), on chosen cases and on random parsed values with members in and out of
 * order, integer-like names, and names outside the Basic Multilingual Plane. The audit hashes
 * bytes written by canonical-json-bytes.ts when it can: they must be that very text's UTF-8.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { canonicalJson } from '../../src/ops/canonical-json.js';
import { canonicalJsonInto } from '../../src/ops/canonical-json-bytes.js';
import { Utf8BatchWriter } from '../../src/ops/utf8-batch-writer.js';

/** The definition: each object's members sorted by UTF-16 code units, written one by one. */
function definition(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return '[' + value.map(definition).join(',') + ']';
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return '{' + Object.keys(record).sort().map((k) => JSON.stringify(k) + ':' + definition(record[k])).join(',') + '}';
  }
  return JSON.stringify(value);
}

/** A small seeded generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

const NAMES = ['a', 'b', 'z', 'A', 'Z', '_meta', 'id', '10', '9', '0', '01', 'é', 'ß', '😀', '\u{1F600}x', 'a\u0000', 'key with space', '"q"', 'k\\'];
const STRINGS = ['', 'hello', 'line\nbreak', 'tab\t', 'quote"', 'back\\slash', '\u2028', 'é😀', '\ud800'];
const NUMBERS = [0, -0, 1, -1, 1.5, 1e21, 1e-7, 123456789012345680000, Number.MAX_SAFE_INTEGER, 5e-324];

/** A random JSON value as JSON.parse would give it, its members in the order drawn. */
function value(next: () => number, depth: number): unknown {
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)]!;
  const kind = depth > 3 ? Math.floor(next() * 4) : Math.floor(next() * 6);
  if (kind === 0) return pick(STRINGS);
  if (kind === 1) return pick(NUMBERS);
  if (kind === 2) return next() < 0.5;
  if (kind === 3) return null;
  if (kind === 4) return Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth + 1));
  const names = Array.from({ length: Math.floor(next() * 5) }, () => pick(NAMES));
  // Half the objects sorted before they are made, as a client that sorts would send them.
  if (next() < 0.5) names.sort();
  const entries = names.map((n) => `${JSON.stringify(n)}:${JSON.stringify(value(next, depth + 1))}`);
  return JSON.parse(`{${entries.join(',')}}`);
}

describe('canonicalJson', () => {
  test('chosen values: members sorted at every level, no whitespace', () => {
    const cases: Array<[unknown, string]> = [
      [{ message: 'hello' }, '{"message":"hello"}'],
      [{ b: 1, a: [{ d: true, c: null }] }, '{"a":[{"c":null,"d":true}],"b":1}'],
      [JSON.parse('{"10":1,"9":2,"a":3}'), '{"10":1,"9":2,"a":3}'],
      [JSON.parse('{"a":1,"A":2}'), '{"A":2,"a":1}'],
      [JSON.parse('{"\u{1F600}":1,"\uffff":2}'), '{"😀":1,"\uffff":2}'],
      [[], '[]'],
      [{}, '{}'],
      [undefined, 'null'],
      [{ a: undefined, b: 1 }, '{"a":null,"b":1}'],
      [[1, undefined], '[1,null]'],
      ['\ud800', '"\\ud800"'],
      [-0, '0'],
      [1e21, '1e+21'],
    ];
    for (const [input, expected] of cases) {
      assert.equal(canonicalJson(input), expected, JSON.stringify(input));
      assert.equal(canonicalJson(input), definition(input), JSON.stringify(input));
    }
  });

  test('5,000 random parsed values, members in order and out of it: the definition\'s text', () => {
    const next = random(20261130);
    let inOrder = 0;
    for (let n = 0; n < 5_000; n++) {
      const v = value(next, 0);
      const expected = definition(v);
      assert.equal(canonicalJson(v), expected, `value ${n}: ${JSON.stringify(v)}`);
      if (JSON.stringify(v) === expected) inOrder++;
    }
    // Both ways were taken many times (the random values are not all of one kind).
    assert.ok(inOrder > 1_000 && inOrder < 4_900, `${inOrder} of 5000 already in order`);
  });

  test('values JSON.stringify would write otherwise are written by the definition', () => {
    const holes = [1, , 3]; // eslint-disable-line no-sparse-arrays
    const withDate = { at: new Date(0) };
    const withToJson = { a: { toJSON: () => 'x' } };
    class Shape {
      constructor(readonly b = 1, readonly a = 2) {}
    }
    for (const v of [holes, withDate, withToJson, new Shape(), { nested: [new Shape()] }]) assert.equal(canonicalJson(v), definition(v));
  });
});

describe('canonicalJsonInto', () => {
  /** What the writer holds after `value` was written behind a prefix, and whether it wrote it. */
  const written = (v: unknown): { wrote: boolean; bytes: Buffer } => {
    const w = new Utf8BatchWriter(Buffer.alloc(16));
    w.write('prefix');
    const wrote = canonicalJsonInto(w, v);
    return { wrote, bytes: w.copy() };
  };

  test('5,000 random parsed values: canonicalJson\'s UTF-8 when written, nothing when not', () => {
    const next = random(20261201);
    let direct = 0;
    for (let n = 0; n < 5_000; n++) {
      const v = value(next, 0);
      const { wrote, bytes } = written(v);
      const expected = wrote ? 'prefix' + canonicalJson(v) : 'prefix';
      assert.deepEqual(bytes, Buffer.from(expected, 'utf8'), `value ${n}: ${JSON.stringify(v)}`);
      if (wrote) direct++;
    }
    // Values in order are written directly, the others left to the sort.
    assert.ok(direct > 1_000 && direct < 4_900, `${direct} of 5000 written directly`);
  });

  test('chosen values: written as canonicalJson writes them, or left to it', () => {
    const holes = [1, , 3]; // eslint-disable-line no-sparse-arrays
    const deep = JSON.parse('['.repeat(40) + ']'.repeat(40));
    const cases: Array<[unknown, boolean]> = [
      [{ message: 'hello, switchboard' }, true],
      [{ a: [1, -2, 1.5, -0, 1e21, 5e-324, true, null, 'é😀\ud800'] }, true],
      [JSON.parse('{"a":1,"b":{"c":"line\\nbreak"}}'), true],
      [{ b: 1, a: 2 }, false],
      [JSON.parse('{"10":1,"9":2}'), false],
      [{ a: undefined }, false],
      [holes, false],
      [{ at: new Date(0) }, false],
      [deep, false],
    ];
    for (const [v, direct] of cases) {
      const { wrote, bytes } = written(v);
      assert.equal(wrote, direct, JSON.stringify(v));
      assert.deepEqual(bytes, Buffer.from(wrote ? 'prefix' + canonicalJson(v) : 'prefix', 'utf8'), JSON.stringify(v));
    }
  });
});
