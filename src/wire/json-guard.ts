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
 * The open objects' member names, one {@link ObjectNames} per depth, kept between calls: the
 * scan runs on every client message, and reusing them leaves it allocation-free for a message
 * without escaped names (issue 29). Safe because the scan is synchronous and calls nothing that
 * could scan again.
 */
const namesAtDepth: ObjectNames[] = [];
/** Per depth, whether the value open there is an object (reused the same way; depth 0 is the top, neither). */
const isObjectAt: boolean[] = [false];

/**
 * The first problem found in `text`, or undefined. `maxDepth` counts `[` and `{` outside
 * strings: `{"a":[1]}` is 2 deep.
 */
export function jsonShapeProblem(text: string, maxDepth = MAX_JSON_DEPTH): JsonShapeProblem | undefined {
  try {
    return scan(text, maxDepth);
  } finally {
    // Strings cut from this text (a large object's names, an escaped name) would keep the
    // whole text alive until the next message: they are dropped now.
    if (holdingStrings) for (const names of namesAtDepth) names?.reset();
    holdingStrings = false;
  }
}

/** Set when an {@link ObjectNames} took a string of the text being scanned. */
let holdingStrings = false;

/** {@link topParamsName}'s answer for the text scanned last. */
let paramsName = -1;

/**
 * In the text {@link jsonShapeProblem} scanned last: the index of the quote that closes the
 * name of the top-level object's `params` member, spelled without escapes; -1 when there is
 * none (a batch, a message without `params`, a name with an escape). Found by the scan on the
 * way (issue 44 part 1), so the trace context's splice (telemetry/meta-splice.ts) need not walk
 * the text again to find where `params` is. Read it right after the scan: the next scan
 * replaces it. There is one such member at most: the scan refuses duplicate names.
 */
export function topParamsName(): number {
  return paramsName;
}

function scan(text: string, maxDepth: number): JsonShapeProblem | undefined {
  paramsName = -1;
  /** The object open at the current depth, or undefined inside an array (or at the top). */
  let open: ObjectNames | undefined;
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
      if (depth === 1 && i - start === 6 && text.charCodeAt(start) === 0x70 /* p */ && nextBackslash >= i && text.startsWith('params', start)) paramsName = i;
      const duplicate = open?.add(text, start, i, nextBackslash < i);
      if (duplicate !== undefined) return { kind: 'duplicate', name: duplicate };
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return { kind: 'depth' };
      isObjectAt[depth] = c === OPEN_BRACE;
      if (c === OPEN_BRACE) {
        open = namesAtDepth[depth] ??= new ObjectNames();
        open.reset();
      } else open = undefined;
      expectName = c === OPEN_BRACE;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (depth > 0) depth--;
      open = isObjectAt[depth] ? namesAtDepth[depth] : undefined;
      expectName = false;
    } else if (c === COMMA) {
      expectName = open !== undefined;
    }
  }
  return undefined;
}

/** Objects with up to this many members are searched linearly; larger ones get a Set. */
const LINEAR_NAMES = 16;

/**
 * The member names of one object, as where they lie in the text. Most objects have a handful,
 * compared faster in a row than hashed and without a string each; a large object switches to
 * a Set of the names so that the scan stays linear. A name with an escape is compared as
 * `JSON.parse` reads it (`"n\u0061me"` is `"name"`).
 */
class ObjectNames {
  /** Start and end (exclusive) of each name in the text, two numbers per name. */
  readonly #bounds: number[] = [];
  /** The unescaped name, for a name with a backslash; undefined for the others. */
  readonly #unescaped: Array<string | undefined> = [];
  #count = 0;
  #many: Set<string> | undefined;

  reset(): void {
    this.#count = 0;
    this.#many = undefined;
    this.#unescaped.length = 0;
  }

  /** Adds the name at `text[start, end)`; when the object already had it, returns that name (for the error). */
  add(text: string, start: number, end: number, escaped: boolean): string | undefined {
    if (this.#many) {
      const name = nameAt(text, start, end, escaped);
      if (this.#many.has(name)) return name;
      this.#many.add(name);
      return undefined;
    }
    const unescaped = escaped ? unescapeName(text, start, end) : undefined;
    if (escaped) holdingStrings = true;
    for (let k = 0; k < this.#count; k++) if (this.#same(text, k, start, end, unescaped)) return unescaped ?? text.slice(start, end);
    if (this.#count < LINEAR_NAMES) {
      this.#bounds[2 * this.#count] = start;
      this.#bounds[2 * this.#count + 1] = end;
      this.#unescaped[this.#count++] = unescaped;
      return undefined;
    }
    holdingStrings = true;
    this.#many = new Set();
    for (let k = 0; k < this.#count; k++) this.#many.add(this.#nameOf(text, k));
    this.#many.add(unescaped ?? text.slice(start, end));
    return undefined;
  }

  /** Whether the k-th name equals the one at `text[start, end)` (`unescaped` when it has escapes). */
  #same(text: string, k: number, start: number, end: number, unescaped: string | undefined): boolean {
    const theirs = this.#unescaped[k];
    if (theirs !== undefined || unescaped !== undefined) return (theirs ?? this.#nameOf(text, k)) === (unescaped ?? text.slice(start, end));
    const from = this.#bounds[2 * k]!;
    const length = end - start;
    if (this.#bounds[2 * k + 1]! - from !== length) return false;
    for (let j = 0; j < length; j++) if (text.charCodeAt(from + j) !== text.charCodeAt(start + j)) return false;
    return true;
  }

  #nameOf(text: string, k: number): string {
    return this.#unescaped[k] ?? text.slice(this.#bounds[2 * k], this.#bounds[2 * k + 1]);
  }
}

/** The member name at `text[start, end)`, unescaped when it has a backslash. */
function nameAt(text: string, start: number, end: number, escaped: boolean): string {
  return escaped ? unescapeName(text, start, end) : text.slice(start, end);
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
