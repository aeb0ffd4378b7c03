/**
 * Canonical JSON of a parsed JSON value by RFC 8785 (JSON Canonicalization Scheme): object
 * members sorted by their names' UTF-16 code units (JavaScript's default string order), no
 * whitespace, strings and numbers as ECMAScript's JSON.stringify writes them (which is what
 * JCS §3.2.2 prescribes). Two clients that send the same arguments with members in another
 * order or other spacing get the same audit hash (issue 30 §2).
 *
 * Input is what JSON.parse produced, so there are no undefined, functions, NaN or cycles; an
 * `undefined` (absent arguments) is written as `null`.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return '[' + value.map(canonicalJson).join(',') + ']';
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJson(record[k])).join(',') + '}';
  }
  return JSON.stringify(value);
}
