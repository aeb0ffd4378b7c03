/**
 * The audit's outcome of a response message read from its text without parsing it (issue 30
 * "Cost": with `audit` on, JSON.parse of every answer, and the stream made to carry the parsed
 * answer on, were most of the +55–70 µs a call cost). The record needs only four things of a
 * JSON-RPC response: its `id` (to match the request), whether it has a `method` (then it is not
 * a response), `error.code`, and `result.isError` (MCP 2025-11-25 Tools, "Error Handling": a
 * tool's failure is a result with `isError: true`). The telemetry's spans read it too, and take
 * `error.message` besides for the span status's description (telemetry/otel-sdk.ts).
 *
 * The text is walked as JSON's grammar has it, member by member: the top-level object, and the
 * `result` / `error` object under it. Every other value is skipped whole — a string by
 * `indexOf` of its closing quote, an object or array by matching its brackets — so the same
 * bytes inside a string (a tool's text quoting JSON) or deeper (a nested `error`) count for
 * nothing, and no key is copied out of the text to be compared (issue 44 part 1: the scan was
 * 2 % of a plain call's instructions, in every configuration that observes answers). SDK
 * servers write the `id` last, after the whole result: that is why skipping is what must be fast.
 *
 * A backend is not trusted, so what is read is read strictly: the values taken (`id`, `method`,
 * `isError`, `code`, `message`) must be well-formed JSON strings, numbers or literals, every
 * member must have its name, colon and comma, and every bracket its matching one. Anything else —
 * a batch array, truncated or trailing text, a value that is not JSON, nesting deeper than
 * {@link MAX_SKIP_DEPTH} — gives undefined, and the caller parses instead (then JSON.parse is the
 * judge). Duplicate keys: the last one wins, as with JSON.parse.
 */
import { skipSpace, stringEnd } from '../wire/json-scan.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
/** Where a walk met text that is not JSON. */
const INVALID = -1;
/**
 * The deepest a skipped value nests: its open brackets are the bits of one 32-bit integer
 * (object or array), so matching them makes nothing. Deeper text is left to JSON.parse.
 */
const MAX_SKIP_DEPTH = 30;

/** Which object's members are walked: the message, its `result`, or its `error`. */
const MESSAGE = 0;
const RESULT = 1;
const ERROR = 2;
type Level = typeof MESSAGE | typeof RESULT | typeof ERROR;

/** What a member's value is to the scan. */
const SKIPPED = 0;
const ID = 1;
const METHOD = 2;
const RESULT_MEMBER = 3;
const ERROR_MEMBER = 4;
const IS_ERROR = 5;
const CODE = 6;
const MESSAGE_MEMBER = 7;
type Member = typeof SKIPPED | typeof ID | typeof METHOD | typeof RESULT_MEMBER | typeof ERROR_MEMBER | typeof IS_ERROR | typeof CODE | typeof MESSAGE_MEMBER;

/** What the audit reads of a response, shaped as the message it stands for. */
export type ScannedMessage = Pick<JsonRpcMessage, 'id' | 'method'> & { result?: { isError?: true }; error?: { code?: number; message?: string } };

/** The message's audit facts, or undefined when the text is not one complete JSON object. */
export function scanResponse(text: string): ScannedMessage | undefined {
  const open = skipSpace(text, 0);
  if (text.charCodeAt(open) !== OPEN_OBJECT) return undefined;
  const out: ScannedMessage = {};
  const close = members(text, open, MESSAGE, out);
  return close !== INVALID && skipSpace(text, close + 1) === text.length ? out : undefined;
}

/** Walks the members of the object whose `{` is at `open`: the index of its `}`, or INVALID. */
function members(text: string, open: number, level: Level, out: ScannedMessage): number {
  let i = skipSpace(text, open + 1);
  if (text.charCodeAt(i) === CLOSE_OBJECT) return i;
  for (;;) {
    if (text.charCodeAt(i) !== QUOTE) return INVALID;
    const nameEnd = stringEnd(text, i);
    if (nameEnd < 0) return INVALID;
    const member = memberOf(text, i, nameEnd, level);
    if (member === INVALID) return INVALID;
    let v = skipSpace(text, nameEnd + 1);
    if (text.charCodeAt(v) !== COLON) return INVALID;
    v = skipSpace(text, v + 1);
    const after = member === SKIPPED ? valueEnd(text, v) : readValue(text, v, member, out);
    if (after === INVALID) return INVALID;
    i = skipSpace(text, after);
    const c = text.charCodeAt(i);
    if (c === CLOSE_OBJECT) return i;
    if (c !== COMMA) return INVALID;
    i = skipSpace(text, i + 1);
  }
}

/**
 * What the member named by the string between the quotes at `start` and `end` is, at `level`.
 * Its raw text is compared in place; only a name that is none of them and holds an escape is
 * decoded (as JSON.parse reads it), since `"i\u0064"` is `id` too.
 */
function memberOf(text: string, start: number, end: number, level: Level): Member | typeof INVALID {
  const known = rawMember(text, start + 1, end - start - 1, level);
  if (known !== SKIPPED) return known;
  for (let j = start + 1; j < end; j++) {
    const c = text.charCodeAt(j);
    if (c < 0x20) return INVALID; // a raw control character: not a JSON string
    if (c === BACKSLASH) return namedMember(JSON.parse(text.slice(start, end + 1)) as string, level);
  }
  return SKIPPED;
}

/** The member whose name is the `length` characters at `at`, compared without copying them. */
function rawMember(text: string, at: number, length: number, level: Level): Member {
  if (level === MESSAGE) {
    if (length === 2) return text.startsWith('id', at) ? ID : SKIPPED;
    if (length === 6) return text.startsWith('result', at) ? RESULT_MEMBER : text.startsWith('method', at) ? METHOD : SKIPPED;
    return length === 5 && text.startsWith('error', at) ? ERROR_MEMBER : SKIPPED;
  }
  if (level === RESULT) return length === 7 && text.startsWith('isError', at) ? IS_ERROR : SKIPPED;
  if (length === 4) return text.startsWith('code', at) ? CODE : SKIPPED;
  return length === 7 && text.startsWith('message', at) ? MESSAGE_MEMBER : SKIPPED;
}

/** {@link rawMember} for a decoded name. */
function namedMember(name: string, level: Level): Member {
  return rawMember(name, 0, name.length, level);
}

/** Reads a member the record needs into `out`: the index after its value, or INVALID. */
function readValue(text: string, i: number, member: Member, out: ScannedMessage): number {
  const c = text.charCodeAt(i);
  switch (member) {
    case ID:
    case METHOD:
    case MESSAGE_MEMBER: {
      const end = c === QUOTE ? stringEnd(text, i) : c === MINUS || (c >= ZERO && c <= NINE) ? numberEnd(text, i) : valueEnd(text, i);
      if (end === INVALID) return INVALID;
      const value = c === QUOTE ? stringValue(text, i, end) : c === MINUS || (c >= ZERO && c <= NINE) ? Number(text.slice(i, end)) : null;
      if (value === INVALID_STRING) return INVALID;
      if (member === ID) out.id = typeof value === 'string' || typeof value === 'number' ? value : null;
      else if (member === METHOD) out.method = typeof value === 'string' ? value : '';
      else out.error!.message = typeof value === 'string' ? value : undefined;
      return c === QUOTE ? end + 1 : end;
    }
    case RESULT_MEMBER:
    case ERROR_MEMBER: {
      // Only an object (or array) counts, as `m.result` / `m.error` truthy does for JSON.parse's message.
      const container = c === OPEN_OBJECT || c === OPEN_ARRAY;
      if (member === RESULT_MEMBER) out.result = container ? {} : undefined;
      else out.error = container ? {} : undefined;
      if (c !== OPEN_OBJECT) return valueEnd(text, i);
      const close = members(text, i, member === RESULT_MEMBER ? RESULT : ERROR, out);
      return close === INVALID ? INVALID : close + 1;
    }
    case IS_ERROR:
      out.result = text.startsWith('true', i) ? { isError: true } : {};
      return valueEnd(text, i);
    case CODE: {
      const number = c === MINUS || (c >= ZERO && c <= NINE);
      const end = number ? numberEnd(text, i) : valueEnd(text, i);
      if (end !== INVALID) out.error!.code = number ? Number(text.slice(i, end)) : undefined;
      return end;
    }
    default:
      return valueEnd(text, i);
  }
}

/** A string that is not JSON's (a raw control character in it). */
const INVALID_STRING = Symbol('invalid string');

/** The string whose quotes are at `start` and `end`: the text between as it is, unless it holds an escape — then as JSON.parse reads it. */
function stringValue(text: string, start: number, end: number): string | typeof INVALID_STRING {
  for (let j = start + 1; j < end; j++) {
    const c = text.charCodeAt(j);
    if (c < 0x20) return INVALID_STRING;
    if (c === BACKSLASH) {
      try {
        return JSON.parse(text.slice(start, end + 1)) as string;
      } catch {
        return INVALID_STRING; // an escape JSON has not
      }
    }
  }
  return text.slice(start + 1, end);
}

/** The index just after the value starting at `i`, skipped whole; INVALID when it is not one. */
function valueEnd(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === QUOTE) {
    const end = stringEnd(text, i);
    return end < 0 ? INVALID : end + 1;
  }
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) return containerEnd(text, i);
  if (c === MINUS || (c >= ZERO && c <= NINE)) return numberEnd(text, i);
  for (const literal of LITERALS) if (text.startsWith(literal, i)) return i + literal.length;
  return INVALID;
}

const LITERALS = ['true', 'false', 'null'] as const;

/**
 * The index just after the object or array opening at `open`, its brackets matched by kind
 * and strings skipped whole; INVALID when it does not close, closes with the other bracket, or
 * nests deeper than {@link MAX_SKIP_DEPTH}.
 */
function containerEnd(text: string, open: number): number {
  let objects = 0; // bit k: whether the bracket open at depth k+1 is an object's
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) return INVALID;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === MAX_SKIP_DEPTH) return INVALID;
      objects = (objects << 1) | (c === OPEN_OBJECT ? 1 : 0);
      depth++;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if ((objects & 1) !== (c === CLOSE_OBJECT ? 1 : 0)) return INVALID;
      objects >>>= 1;
      if (--depth === 0) return i + 1;
    }
  }
  return INVALID;
}

const isDigit = (c: number) => c >= ZERO && c <= NINE;

/** The index just after the JSON number starting at `i` (RFC 8259 §6's grammar), or INVALID. */
function numberEnd(text: string, i: number): number {
  let j = text.charCodeAt(i) === MINUS ? i + 1 : i;
  if (text.charCodeAt(j) === ZERO) j++;
  else if (isDigit(text.charCodeAt(j))) while (isDigit(text.charCodeAt(j))) j++;
  else return INVALID;
  if (text.charCodeAt(j) === DOT) {
    if (!isDigit(text.charCodeAt(++j))) return INVALID;
    while (isDigit(text.charCodeAt(j))) j++;
  }
  const e = text.charCodeAt(j);
  if (e === 0x65 || e === 0x45) {
    const sign = text.charCodeAt(++j);
    if (sign === PLUS || sign === MINUS) j++;
    if (!isDigit(text.charCodeAt(j))) return INVALID;
    while (isDigit(text.charCodeAt(j))) j++;
  }
  return j;
}

