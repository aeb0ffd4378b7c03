/**
 * Reading JSON text without parsing it, for the paths where a parse (and a stringify after it)
 * would cost more than the few facts needed (issue 30 "Cost"): the trace context spliced into a
 * request's `params._meta` (telemetry/meta-splice.ts) and the ids a stream's answer carries
 * (streams/answered-ids.ts). String contents are skipped with `indexOf`, so bytes inside a
 * string never count as structure. (The answer's outcome is read from its bytes, not its text:
 * policy/outcome-scan.ts.)
 */

/** The index of the quote closing the string that opens at `start`, or -1. */
export function stringEnd(text: string, start: number): number {
  let j = start + 1;
  for (;;) {
    j = text.indexOf('"', j);
    if (j < 0) return -1;
    let slashes = 0;
    while (text.charCodeAt(j - 1 - slashes) === 0x5c /* \\ */) slashes++;
    if (slashes % 2 === 0) return j;
    j++;
  }
}

export const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** The first index at or after `i` that is not JSON white space. */
export function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** Where a member of one object is: its value's first index (undefined when absent), and the object's closing brace. */
export interface MemberPlace {
  value?: number;
  close: number;
}

/**
 * Walks the members of the object whose `{` is at `open`, in order: `visit` gets each member's
 * raw name (the indexes just inside its quotes) and its value's first index. Returns the
 * object's closing brace, or undefined when the object does not close (text cut short or not
 * JSON). Nested objects and arrays are skipped, strings by {@link stringEnd}.
 */
export function objectMembers(text: string, open: number, visit: (nameStart: number, nameEnd: number, value: number) => void): number | undefined {
  let depth = 0;
  // Literals, not module constants, in a loop that runs once a character (ops/utf8-batch-writer.ts says why).
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i);
      if (end < 0) return undefined;
      if (depth === 1) {
        const colon = skipSpace(text, end + 1);
        if (text.charCodeAt(colon) === 0x3a) visit(i + 1, end, skipSpace(text, colon + 1));
      }
      i = end;
    } else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i;
    }
  }
  return undefined;
}

/**
 * The member `key` of the object whose `{` is at `open` — the last one, as JSON.parse keeps
 * the last of duplicate names — found by its raw name. The raw name equals the decoded one
 * unless the text spells it with a `\u` escape, which the caller rules out when it matters.
 * Undefined when the object does not close (text cut short or not JSON).
 */
export function objectMember(text: string, open: number, key: string): MemberPlace | undefined {
  let value: number | undefined;
  const close = objectMembers(text, open, (nameStart, nameEnd, valueStart) => {
    if (nameEnd - nameStart === key.length && text.startsWith(key, nameStart)) value = valueStart;
  });
  return close === undefined ? undefined : { value, close };
}
