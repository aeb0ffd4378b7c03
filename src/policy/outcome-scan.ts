/**
 * The audit's outcome of a response message read from its text without parsing it (issue 30
 * "Cost": with `audit` on, JSON.parse of every answer, and the stream made to carry the parsed
 * answer on, were most of the +55–70 µs a call cost). The record needs only four things of a
 * JSON-RPC response: its `id` (to match the request), whether it has a `method` (then it is not
 * a response), `error.code`, and `result.isError` (MCP 2025-11-25 Tools, "Error Handling": a
 * tool's failure is a result with `isError: true`). The telemetry's spans read it too, and take
 * `error.message` besides for the span status's description (telemetry/otel-sdk.ts).
 *
 * The answer's UTF-8 bytes are walked as JSON's grammar has it, member by member: the top-level
 * object, and the `result` / `error` object under it. Every other value is skipped whole — a
 * string to its closing quote, an object or array by matching its brackets — so the same bytes
 * inside a string (a tool's text quoting JSON) or deeper (a nested `error`) count for nothing,
 * and no name is copied out to be compared. SDK servers write the `id` last, after the whole
 * result: that is why skipping is what must be fast (issue 44 part 1: the scan of a JSON answer
 * and its decoding were about 11 k instructions of a 300 k plain call, in every configuration
 * that observes answers). It reads bytes, not a string: the JSON answer is not decoded at all,
 * and in a loop a byte of a `Uint8Array` costs V8 under half what a `charCodeAt` does; with the
 * decode gone, the 231-byte answer of the benchmarks scans in 0.90 µs against 0.94–1.0 for the
 * decode and the string scan (bundled, best of 25, docs/performance.md, session of 2026-11-30
 * 04:28 UTC). Strings are crossed by `indexOf` (memchr), not byte by byte: a byte looked at in
 * JavaScript costs V8 about 30 instructions on this machine, a search about 180 whatever its
 * length up to a few dozen bytes (13.9 k instructions a scan of that answer before, 11.1 k after,
 * with the byte loops' literals below: bench/micro-count.ts `scan`).
 *
 * A backend is not trusted, so what is read is read strictly: the values taken (`id`, `method`,
 * `isError`, `code`, `message`) must be well-formed JSON strings, numbers or literals, every
 * member must have its name, colon and comma, and every bracket its matching one. Anything else —
 * a batch array, truncated or trailing text, a value that is not JSON, nesting deeper than
 * {@link MAX_SKIP_DEPTH} — gives undefined, and the caller parses instead (then JSON.parse is the
 * judge). Duplicate keys: the last one wins, as with JSON.parse.
 */
import type { JsonRpcMessage } from '../wire/jsonrpc.js';

const QUOTE = 0x22;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
/*
 * The loops that run once a byte compare with literals, not with these constants: a module's
 * top-level constant is a slot of the module's context to V8, loaded and checked on every pass
 * (utf8-batch-writer.ts says more).
 */
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

/** The message's audit facts, or undefined when the bytes are not one complete JSON object (as UTF-8). */
export function scanResponse(text: Buffer): ScannedMessage | undefined {
  const open = skipSpace(text, 0);
  if (byteAt(text, open) !== OPEN_OBJECT) return undefined;
  const out: ScannedMessage = {};
  const close = members(text, open, MESSAGE, out);
  return close !== INVALID && skipSpace(text, close + 1) === text.length ? out : undefined;
}

/**
 * Whether a message's text can hold an error outcome at all: a member named `error` (the
 * JSON-RPC error) or `isError` (MCP 2025-11-25 Tools, "Error Handling"). Written plainly, both
 * names end in `rror"`; a name spelled with escapes needs a `\u` (JSON's only escape that gives
 * a letter). Text with neither cannot carry one — whatever else it holds, valid or not — so an
 * observer that acts only on errors (answer-observe.ts `AnswerObserver.errorsOnly`) need not have
 * it scanned (issue 44 part 1: the scan was half of what metrics only added to a call). Two
 * native searches, not a walk; a false "maybe" (a `"mirror"` member, an escaped `\\u` in a
 * Windows path) only costs the scan.
 */
export function bytesMayHoldError(bytes: Buffer): boolean {
  return bytes.indexOf(ERROR_NAME_END_BYTES) >= 0 || bytes.indexOf(UNICODE_ESCAPE_BYTES) >= 0;
}

/** {@link bytesMayHoldError} for a message's text (an SSE event's data). */
export function textMayHoldError(text: string): boolean {
  return text.indexOf(ERROR_NAME_END) >= 0 || text.indexOf(UNICODE_ESCAPE) >= 0;
}

const ERROR_NAME_END = 'rror"';
const UNICODE_ESCAPE = '\\u';
/** The same as bytes: a `Buffer` searched for a `Buffer` costs about 1.2 k instructions in the benchmarks' answer, for a string about 1.9 k. */
const ERROR_NAME_END_BYTES = Buffer.from(ERROR_NAME_END);
const UNICODE_ESCAPE_BYTES = Buffer.from(UNICODE_ESCAPE);

/**
 * The byte at `i`, or {@link END} past the last one. No read goes past the end: one that does
 * makes V8 treat every byte read at that place as maybe `undefined`, and every comparison of
 * it a generic one (a third of the scan's time).
 */
function byteAt(text: Uint8Array, i: number): number {
  return i < text.length ? text[i]! : END;
}

/** Stands for the byte past the last. */
const END = -1;

/** The first index at or after `i` that is not JSON white space. */
function skipSpace(text: Buffer, i: number): number {
  const n = text.length;
  for (; i < n; i++) {
    const c = text[i]!;
    if (c !== 0x20 /* space */ && c !== 0x0a /* LF */ && c !== 0x0d /* CR */ && c !== 0x09 /* tab */) return i;
  }
  return n;
}

/**
 * The index of the quote closing the string that opens at `start`, or INVALID: the first quote
 * `indexOf` finds after it, unless an odd run of backslashes stands before it (then the next).
 * `indexOf` is memchr behind a fast call: about 180 instructions for a search of 25 bytes on
 * this machine, where a JavaScript loop over the same bytes took about 700 — a string of more
 * than a few bytes is cheaper searched than walked (issue 44 part 1, session 29).
 */
function stringEnd(text: Buffer, start: number): number {
  let j = start + 1;
  for (;;) {
    j = text.indexOf(QUOTE, j);
    if (j < 0) return INVALID;
    // The run stops at the opening quote at the latest: no read before `start`.
    let slashes = 0;
    while (text[j - 1 - slashes] === 0x5c /* \\ */) slashes++;
    if (slashes % 2 === 0) return j;
    j++;
  }
}

/** Walks the members of the object whose `{` is at `open`: the index of its `}`, or INVALID. */
function members(text: Buffer, open: number, level: Level, out: ScannedMessage): number {
  let i = skipSpace(text, open + 1);
  if (byteAt(text, i) === CLOSE_OBJECT) return i;
  for (;;) {
    if (byteAt(text, i) !== QUOTE) return INVALID;
    const nameEnd = stringEnd(text, i);
    if (nameEnd < 0) return INVALID;
    const member = memberOf(text, i, nameEnd, level);
    if (member === INVALID) return INVALID;
    let v = skipSpace(text, nameEnd + 1);
    if (byteAt(text, v) !== COLON) return INVALID;
    v = skipSpace(text, v + 1);
    const after = member === SKIPPED ? valueEnd(text, v) : readValue(text, v, member, out);
    if (after === INVALID) return INVALID;
    i = skipSpace(text, after);
    const c = byteAt(text, i);
    if (c === CLOSE_OBJECT) return i;
    if (c !== COMMA) return INVALID;
    i = skipSpace(text, i + 1);
  }
}

/**
 * What the member named by the string between the quotes at `start` and `end` is, at `level`.
 * Its bytes are compared in place; only a name that is none of them and holds an escape is
 * decoded (as JSON.parse reads it), since `"i\u0064"` is `id` too.
 */
function memberOf(text: Buffer, start: number, end: number, level: Level): Member | typeof INVALID {
  const known = rawMember(text, start + 1, end - start - 1, level);
  if (known !== SKIPPED) return known;
  const form = stringForm(text, start, end);
  if (form === PLAIN) return SKIPPED;
  const name = form === ESCAPED ? decoded(text, start, end) : INVALID_STRING;
  return name === INVALID_STRING ? INVALID : namedMember(name, level);
}

/** The names the scan reads, as bytes. */
const NAME = { id: Buffer.from('id'), method: Buffer.from('method'), result: Buffer.from('result'), error: Buffer.from('error'), isError: Buffer.from('isError'), code: Buffer.from('code'), message: Buffer.from('message') };

/** Whether the bytes at `at` are `name`'s (the length already checked). */
function isNamed(text: Uint8Array, at: number, name: Uint8Array): boolean {
  if (at + name.length > text.length) return false;
  for (let k = 0; k < name.length; k++) if (text[at + k] !== name[k]) return false;
  return true;
}

/** The member whose name is the `length` bytes at `at`, compared without copying them. */
function rawMember(text: Uint8Array, at: number, length: number, level: Level): Member {
  if (level === MESSAGE) {
    if (length === 2) return isNamed(text, at, NAME.id) ? ID : SKIPPED;
    if (length === 6) return isNamed(text, at, NAME.result) ? RESULT_MEMBER : isNamed(text, at, NAME.method) ? METHOD : SKIPPED;
    return length === 5 && isNamed(text, at, NAME.error) ? ERROR_MEMBER : SKIPPED;
  }
  if (level === RESULT) return length === 7 && isNamed(text, at, NAME.isError) ? IS_ERROR : SKIPPED;
  if (length === 4) return isNamed(text, at, NAME.code) ? CODE : SKIPPED;
  return length === 7 && isNamed(text, at, NAME.message) ? MESSAGE_MEMBER : SKIPPED;
}

/** {@link rawMember} for a decoded name. */
function namedMember(name: string, level: Level): Member {
  const bytes = Buffer.from(name, 'utf8');
  return rawMember(bytes, 0, bytes.length, level);
}

const isNumberStart = (c: number) => c === MINUS || (c >= ZERO && c <= NINE);

/** Reads a member the record needs into `out`: the index after its value, or INVALID. */
function readValue(text: Buffer, i: number, member: Member, out: ScannedMessage): number {
  const c = byteAt(text, i);
  switch (member) {
    case ID:
    case METHOD:
    case MESSAGE_MEMBER: {
      const end = c === QUOTE ? stringEnd(text, i) : isNumberStart(c) ? numberEnd(text, i) : valueEnd(text, i);
      if (end === INVALID) return INVALID;
      const value = c === QUOTE ? stringValue(text, i, end) : isNumberStart(c) ? numberValue(text, i, end) : null;
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
      out.result = isNamed(text, i, LITERAL.true) ? { isError: true } : {};
      return valueEnd(text, i);
    case CODE: {
      const number = isNumberStart(c);
      const end = number ? numberEnd(text, i) : valueEnd(text, i);
      if (end !== INVALID) out.error!.code = number ? numberValue(text, i, end) : undefined;
      return end;
    }
    default:
      return valueEnd(text, i);
  }
}

/** A string that is not JSON's (a raw control character in it, or an escape JSON has not). */
const INVALID_STRING = Symbol('invalid string');

/** What the string whose quotes are at `start` and `end` holds: no escape, an escape, or a raw control character (then it is not JSON's). */
const PLAIN = 0;
const ESCAPED = 1;
const NOT_JSON = 2;

function stringForm(text: Buffer, start: number, end: number): typeof PLAIN | typeof ESCAPED | typeof NOT_JSON {
  for (let j = start + 1; j < end; j++) {
    const c = text[j]!;
    if (c < 0x20) return NOT_JSON;
    if (c === 0x5c /* \\ */) return ESCAPED;
  }
  return PLAIN;
}

/** The string whose quotes are at `start` and `end`: its UTF-8 between them as it is, unless it holds an escape — then as JSON.parse reads it. */
function stringValue(text: Buffer, start: number, end: number): string | typeof INVALID_STRING {
  const form = stringForm(text, start, end);
  if (form === PLAIN) return text.toString('utf8', start + 1, end);
  return form === ESCAPED ? decoded(text, start, end) : INVALID_STRING;
}

/** The string literal whose quotes are at `start` and `end`, as JSON.parse reads it. */
function decoded(text: Buffer, start: number, end: number): string | typeof INVALID_STRING {
  try {
    return JSON.parse(text.toString('utf8', start, end + 1)) as string;
  } catch {
    return INVALID_STRING;
  }
}

/** The number whose text (already checked by {@link numberEnd}) is the bytes from `start` to `end`, as JSON.parse reads it. */
function numberValue(text: Buffer, start: number, end: number): number {
  const negative = byteAt(text, start) === MINUS;
  let value = 0;
  // Up to 15 digits and nothing else: exact in a double, so summed here (a JSON-RPC id, an error code).
  if (end - start <= 15) {
    for (let j = negative ? start + 1 : start; j < end; j++) {
      const c = byteAt(text, j);
      if (c < ZERO || c > NINE) return Number(text.toString('latin1', start, end));
      value = value * 10 + (c - ZERO);
    }
    return negative ? -value : value;
  }
  return Number(text.toString('latin1', start, end));
}

/** The index just after the value starting at `i`, skipped whole; INVALID when it is not one. */
function valueEnd(text: Buffer, i: number): number {
  const c = byteAt(text, i);
  if (c === QUOTE) {
    const end = stringEnd(text, i);
    return end < 0 ? INVALID : end + 1;
  }
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) return containerEnd(text, i);
  if (isNumberStart(c)) return numberEnd(text, i);
  for (const literal of LITERALS) if (isNamed(text, i, literal)) return i + literal.length;
  return INVALID;
}

const LITERAL = { true: Buffer.from('true'), false: Buffer.from('false'), null: Buffer.from('null') };
const LITERALS = [LITERAL.true, LITERAL.false, LITERAL.null];

/**
 * The index just after the object or array opening at `open`, its brackets matched by kind
 * and strings skipped whole; INVALID when it does not close, closes with the other bracket, or
 * nests deeper than {@link MAX_SKIP_DEPTH}. Only the bytes between strings are looked at one by
 * one, and a string is crossed by {@link stringEnd} from its opening quote. Between strings
 * stand a few brackets, colons and commas, so a search for the next quote first cost one
 * `indexOf` per string for bytes the loop then read anyway (about 1.4 k instructions of the
 * benchmarks' answer: bench/micro-count.ts `scan` 10.7–11.0 k → 9.3–9.6 k, issue 44 part 1).
 */
function containerEnd(text: Buffer, open: number): number {
  let objects = 0; // bit k: whether the bracket open at depth k+1 is an object's
  let depth = 0;
  const n = text.length;
  for (let i = open; i < n; i++) {
    const c = text[i]!;
    if (c === 0x22 /* " */) {
      i = stringEnd(text, i);
      if (i < 0) return INVALID;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (depth === MAX_SKIP_DEPTH) return INVALID;
      objects = (objects << 1) | (c === 0x7b ? 1 : 0);
      depth++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if ((objects & 1) !== (c === 0x7d ? 1 : 0)) return INVALID;
      objects >>>= 1;
      if (--depth === 0) return i + 1;
    }
  }
  return INVALID;
}

const isDigit = (c: number) => c >= 0x30 /* 0 */ && c <= 0x39; /* 9 */

/** The index just after the JSON number starting at `i` (RFC 8259 §6's grammar), or INVALID. */
function numberEnd(text: Buffer, i: number): number {
  let j = byteAt(text, i) === MINUS ? i + 1 : i;
  if (byteAt(text, j) === ZERO) j++;
  else if (isDigit(byteAt(text, j))) while (isDigit(byteAt(text, j))) j++;
  else return INVALID;
  if (byteAt(text, j) === DOT) {
    if (!isDigit(byteAt(text, ++j))) return INVALID;
    while (isDigit(byteAt(text, j))) j++;
  }
  const e = byteAt(text, j);
  if (e === 0x65 || e === 0x45) {
    const sign = byteAt(text, ++j);
    if (sign === PLUS || sign === MINUS) j++;
    if (!isDigit(byteAt(text, j))) return INVALID;
    while (isDigit(byteAt(text, j))) j++;
  }
  return j;
}
