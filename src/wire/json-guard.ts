/**
 * Two properties of a client's JSON text that `JSON.parse` does not check and the gateway
 * needs, found in one pass over the text's char codes before it is parsed (issue 13):
 *
 * - **Nesting depth.** V8 parses a 500,000-level array without complaint, but the gateway
 *   later walks what it parsed recursively (`JSON.stringify` when a session is stored, the
 *   aggregate's rewrites), and a stack overflow there was reported as "state unavailable"
 *   after the backend session had been opened. Messages nested deeper than
 *   {@link MAX_JSON_DEPTH} are refused before anything happens.
 * - **Duplicate member names.** RFC 8259 §4 only says names SHOULD be unique, and parsers
 *   disagree about which of two equal names wins: `JSON.parse` keeps the last, many others
 *   the first. The gateway decides on the parsed message (tool policy on `params.name`,
 *   routing on `method`, `id`, `params.uri` / `params.ref`) but forwards the client's own
 *   bytes, so a backend keeping the first `name` could be called with a tool the policy
 *   denied. Every object of the message is checked, not only the members the gateway reads
 *   today: the list of those grows with every feature, and I-JSON (RFC 7493 §2.3) forbids
 *   duplicates anywhere. Names are compared after unescaping (`"n\u0061me"` is `"name"`).
 *
 * Cost: one loop over the char codes outside strings, strings skipped with `indexOf`
 * (vectorised), and one short string per member name. Measured against `JSON.parse` of the
 * same text (Node 20): a 140-byte `tools/call` 0.65 µs vs 1.5 µs, 1.5 MB of small objects
 * 5 ms vs 13 ms, 3 MB in one string 0.09 ms vs 12 ms; a proxied call costs the gateway
 * about 300 µs of CPU (docs/performance.md), so the scan is well under 1% of it.
 * The scan assumes nothing about validity: on text that is not JSON it returns some verdict
 * in linear time, and `JSON.parse` then rejects the text.
 */

/**
 * Deepest nesting of arrays and objects accepted in a client message. MCP messages are
 * shallow (a `tools/call` with structured arguments is rarely ten levels deep); 128 is
 * serde_json's default recursion limit and far below what the gateway's recursive walks
 * survive (several thousand levels).
 */
export const MAX_JSON_DEPTH = 128;

export type JsonShapeProblem = { kind: 'depth' } | { kind: 'duplicate'; name: string };

/** The bytes (and UTF-16 units) of JSON's structure; shared with json-lines.ts. */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/**
 * The first problem found in `text`, or undefined. `maxDepth` counts `[` and `{` outside
 * strings: `{"a":[1]}` is 2 deep.
 */
export function jsonShapeProblem(text: string, maxDepth = MAX_JSON_DEPTH): JsonShapeProblem | undefined {
  /** The open object's member names at each depth (reused), or undefined for an array. */
  const names: Array<ObjectNames | undefined> = [];
  const spare: ObjectNames[] = [];
  let depth = 0;
  /** True right after `{` or after `,` in an object: the next string is a member name. */
  let expectName = false;
  const length = text.length;
  /** Where the first backslash at or after the current string's start is (length: none). */
  let nextBackslash = -1;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // A string: jump to its closing quote (indexOf is vectorised), skipping escaped ones.
      const start = i + 1;
      if (nextBackslash < start) nextBackslash = indexOrEnd(text, '\\', start);
      i = indexOrEnd(text, '"', start);
      while (nextBackslash < i && isEscaped(text, i)) i = indexOrEnd(text, '"', i + 1);
      if (!expectName) continue;
      expectName = false;
      const seen = names[depth];
      if (!seen) continue;
      const name = nextBackslash < i ? unescapeName(text, start, i) : text.slice(start, i);
      if (!seen.add(name)) return { kind: 'duplicate', name };
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return { kind: 'depth' };
      if (c === OPEN_BRACE) {
        const seen = (names[depth] = spare[depth] ??= new ObjectNames());
        seen.reset();
        expectName = true;
      } else {
        names[depth] = undefined;
        expectName = false;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth > 0) depth--;
      expectName = false;
    } else if (c === COMMA) {
      expectName = names[depth] !== undefined;
    }
  }
  return undefined;
}

/** Objects with up to this many members are searched linearly; larger ones get a Set. */
const LINEAR_NAMES = 16;

/**
 * The member names of one object. Most objects have a handful, compared faster in a row
 * than hashed; a large object switches to a Set so that the scan stays linear.
 */
class ObjectNames {
  readonly #few: string[] = [];
  #count = 0;
  #many: Set<string> | undefined;

  reset(): void {
    this.#count = 0;
    this.#many?.clear();
    this.#many = undefined;
  }

  /** Adds `name`; false when the object already had it. */
  add(name: string): boolean {
    if (this.#many) {
      if (this.#many.has(name)) return false;
      this.#many.add(name);
      return true;
    }
    const few = this.#few;
    for (let k = 0; k < this.#count; k++) if (few[k] === name) return false;
    if (this.#count < LINEAR_NAMES) {
      few[this.#count++] = name;
      return true;
    }
    this.#many = new Set(few);
    this.#many.add(name);
    return true;
  }
}

/** Where `search` next occurs at or after `from`; the text's length when it does not. */
export function indexOrEnd(text: string, search: string, from: number): number {
  const at = text.indexOf(search, from);
  return at === -1 ? text.length : at;
}

/** True when the quote at `at` is preceded by an odd number of backslashes. */
function isEscaped(text: string, at: number): boolean {
  let k = at - 1;
  while (text.charCodeAt(k) === BACKSLASH) k--;
  return (at - 1 - k) % 2 === 1;
}

/** A member name with escapes, as JSON.parse would read it; the raw text if it is not valid. */
function unescapeName(text: string, start: number, end: number): string {
  try {
    return JSON.parse(text.slice(start - 1, end + 1)) as string;
  } catch {
    return text.slice(start, end);
  }
}
