/**
 * Canonical JSON (RFC 8785, canonical-json.ts) written as UTF-8 bytes into a writer, for the
 * audit's argument hash (audit.ts): the hash is then taken of those bytes, so no JSON string is
 * made, and none is encoded to UTF-8 again inside the hash (issue 44 part 1: `JSON.stringify`
 * of a call's arguments and that encoding were about 3 k instructions of each audited call).
 *
 * Written here only when the value is in canonical order already (members sorted, as
 * canonical-json.ts `inCanonicalOrder` has it) and made of what `JSON.parse` makes: strings,
 * finite numbers, booleans, null, plain arrays without holes and plain objects, at most
 * {@link MAX_DEPTH} deep. For anything else nothing is left written and the answer is false:
 * the caller takes canonical-json.ts's text instead, so the bytes are always that text's.
 * Strings are written as `JSON.stringify` writes them (`Utf8BatchWriter.jsonString`), numbers
 * as ECMAScript's `Number.prototype.toString` does (JCS §3.2.2.3), integers digit by digit.
 */
import type { Utf8BatchWriter } from './utf8-batch-writer.js';

/** Deeper values are left to canonical-json.ts (whose recursion is the one they always had). */
const MAX_DEPTH = 32;

/** Writes `value`'s canonical JSON into `w` and returns true; or writes nothing and returns false. */
export function canonicalJsonInto(w: Utf8BatchWriter, value: unknown): boolean {
  const start = w.length;
  if (writeValue(w, value, 0)) return true;
  w.truncate(start);
  return false;
}

function writeValue(w: Utf8BatchWriter, value: unknown, depth: number): boolean {
  if (value === null) {
    w.write('null');
    return true;
  }
  switch (typeof value) {
    case 'string':
      w.jsonString(value);
      return true;
    case 'boolean':
      w.write(value ? 'true' : 'false');
      return true;
    case 'number':
      return writeNumber(w, value);
    case 'object':
      if (depth >= MAX_DEPTH) return false;
      return Array.isArray(value) ? writeArray(w, value, depth + 1) : writeObject(w, value, depth + 1);
    default:
      return false;
  }
}

/** As `JSON.stringify` writes a finite number: `-0` as `0`, integers by their digits. */
function writeNumber(w: Utf8BatchWriter, n: number): boolean {
  if (!Number.isFinite(n)) return false;
  if (Number.isSafeInteger(n)) {
    if (n < 0) w.byte(0x2d /* - */);
    // Math.abs(-0) is 0, which JSON.stringify writes for -0.
    w.integer(Math.abs(n));
  } else w.write(String(n));
  return true;
}

function writeArray(w: Utf8BatchWriter, array: unknown[], depth: number): boolean {
  if (Object.getPrototypeOf(array) !== Array.prototype) return false;
  w.byte(0x5b /* [ */);
  for (let i = 0; i < array.length; i++) {
    if (i > 0) w.byte(0x2c /* , */);
    // A hole, or anything JSON has not, is left to canonical-json.ts.
    if (!(i in array) || !writeValue(w, array[i], depth)) return false;
  }
  w.byte(0x5d /* ] */);
  return true;
}

function writeObject(w: Utf8BatchWriter, value: object, depth: number): boolean {
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  w.byte(0x7b /* { */);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    // Out of canonical order (integer-like names come first from Object.keys): left to the sort.
    if (i > 0 && !(keys[i - 1]! < key)) return false;
    if (i > 0) w.byte(0x2c /* , */);
    w.jsonString(key);
    w.byte(0x3a /* : */);
    if (!writeValue(w, record[key], depth)) return false;
  }
  w.byte(0x7d /* } */);
  return true;
}
