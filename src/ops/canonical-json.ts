/**
 * Canonical JSON of a parsed JSON value by RFC 8785 (JSON Canonicalization Scheme): object
 * members sorted by their names' UTF-16 code units (JavaScript's default string order), no
 * whitespace, strings and numbers as ECMAScript's JSON.stringify writes them (which is what
 * JCS §3.2.2 prescribes). Two clients that send the same arguments with members in another
 * order or other spacing get the same audit hash (issue 30 §2).
 *
 * Input is what JSON.parse produced, so there are no undefined, functions, NaN or cycles; an
 * `undefined` (absent arguments) is written as `null`.
 *
 * Most values come with their members in order already (one member, or a client that sorts):
 * then `JSON.stringify`'s own text is the canonical one, written by one native call, where the
 * member-by-member writing cost about 1.6 k instructions of each audited call (a key's
 * `JSON.stringify`, a concatenation and a `join` per member; issue 44 part 1). Any value the
 * two would write differently — members out of order, an `undefined`, a hole, anything but
 * JSON's own kinds — is written member by member, as before.
 */
export function canonicalJson(value: unknown): string {
  return inCanonicalOrder(value) ? JSON.stringify(value) : sortedJson(value);
}

/** Member by member, each object's members sorted. */
function sortedJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return '[' + value.map(sortedJson).join(',') + ']';
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + sortedJson(record[k])).join(',') + '}';
  }
  return JSON.stringify(value);
}

/**
 * Whether `JSON.stringify(value)` is {@link sortedJson}'s text: strings, numbers, booleans and
 * null, in plain arrays without holes and plain objects whose members are already in sorted
 * order (strictly: `Object.keys` puts integer-like names first, which the sort may not).
 */
function inCanonicalOrder(value: unknown): boolean {
  if (value === null) return true;
  const type = typeof value;
  if (type === 'string' || type === 'number' || type === 'boolean') return true;
  if (type !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  if (proto === Array.prototype) {
    const array = value as unknown[];
    // A hole reads as undefined, which is refused.
    for (let i = 0; i < array.length; i++) if (!inCanonicalOrder(array[i])) return false;
    return true;
  }
  if (proto !== Object.prototype && proto !== null) return false;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && !(keys[i - 1]! < keys[i]!)) return false;
    if (!inCanonicalOrder(record[keys[i]!])) return false;
  }
  return true;
}
