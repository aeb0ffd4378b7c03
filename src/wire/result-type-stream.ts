/**
 * `resultType` on a 2026-07-28 response too big or too slow to hold whole (issue 29: "a 1 MB
 * tool result still streams without being held whole"), written in as the bytes pass. The
 * member is required on every result (MCP 2026-07-28 changelog, major change 8; schema
 * `Result`); result-type.ts adds it to a message held whole.
 *
 * The opening of the message decides, within {@link OPENING_MAX_BYTES}: it is a response whose
 * result is an object when only `jsonrpc` and `id` come before `"result":{` (as result-type.ts's
 * fast path reads it). The bytes are then passed on as they come, and the member goes in at the
 * result's **closing** brace, only if none of the result's own members was `resultType`. At the
 * opening brace the gateway cannot know whether the backend names the type further on (the SDKs
 * write it last); writing it there could send the key twice, which JSON leaves undefined
 * (RFC 8259 §4). Member order means nothing in an object, so the end is as good a place.
 * Everything else — a notification first (JSON lines), an error, a batch, members in another
 * order, a long id — is `other`, and the caller relays it as before, message by message.
 *
 * Bytes, not text: the structural bytes never occur inside a UTF-8 multi-byte character
 * (json-lines.ts), so a character split across chunks needs no decoder. Like the splitter, it
 * does not validate: a broken body stays broken.
 */
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './json-guard.js';
import { RESULT_TYPE } from './result-type.js';

/** A response whose result has not opened within this many bytes is not streamed (a long id, a `_meta` first). */
export const OPENING_MAX_BYTES = 512;

/** What the opening said: still reading it, a response with a result to stream, or anything else. */
export type OpeningVerdict = 'pending' | 'response' | 'other';

export interface ResultTypeStream {
  /** The next chunk; returns what to pass on for it (the member written in where the result closes). */
  feed(chunk: Buffer): Buffer[];
  readonly verdict: OpeningVerdict;
  /** True once the first JSON value has closed: anything after it belongs to the next message and is not read. */
  readonly ended: boolean;
  /** How many bytes were read: a chunk fed after the message's end is read only up to it. */
  readonly read: number;
}

const COLON = 0x3a;
const COMMA = 0x2c;
/** Keys longer than this (escapes included) are none of `jsonrpc`, `id`, `result`, `resultType`. */
const KEY_MAX_BYTES = 64;
const OPENING_KEYS = new Set(['jsonrpc', 'id']);
const MEMBER = Buffer.from(`"resultType":"${RESULT_TYPE.complete}"`);
const MEMBER_AFTER = Buffer.from(`,${MEMBER.toString('latin1')}`);

interface ScanState {
  verdict: OpeningVerdict;
  ended: boolean;
  /** Open objects and arrays: 1 inside the message, 2 inside its result. */
  depth: number;
  inString: boolean;
  escaped: boolean;
  /** Whether the next string at a depth whose keys are read is a key. */
  keyNext: boolean;
  /** The message's last key read. */
  topKey: string;
  inResult: boolean;
  resultMembers: number;
  typed: boolean;
  read: number;
}

/** True where keys are read: the message's own members, and its result's while it is open. */
function keyDepth(s: ScanState): boolean {
  return s.depth === 1 || (s.depth === 2 && s.inResult);
}

/** A byte outside strings other than a quote; true when it closes a result that named no type. */
function structural(s: ScanState, byte: number): boolean {
  let untyped = false;
  if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
    if (s.verdict === 'pending') {
      s.verdict = opened(s.depth, byte, s.topKey, s.keyNext);
      s.inResult = s.verdict === 'response';
    }
    s.depth++;
    s.keyNext = byte === OPEN_BRACE;
  } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
    if (s.depth === 2 && s.inResult) {
      s.inResult = false;
      untyped = !s.typed;
    }
    if (--s.depth === 0) s.ended = true;
    if (s.ended && s.verdict === 'pending') s.verdict = 'other';
  } else if (byte === COLON && keyDepth(s)) s.keyNext = false;
  else if (byte === COMMA && keyDepth(s)) s.keyNext = true;
  else if (s.depth === 0 && !isSpace(byte)) s.verdict = 'other';
  return untyped;
}

/** A scanner for one answer body; see the file's comment. */
export function createResultTypeStream(): ResultTypeStream {
  const s: ScanState = { verdict: 'pending', ended: false, depth: 0, inString: false, escaped: false, keyNext: false, topKey: '', inResult: false, resultMembers: 0, typed: false, read: 0 };
  let key: Buffer[] | undefined;
  let keySize = 0;

  /** A key of the message (depth 1) or of its result (depth 2) has been read whole. */
  const onKey = (name: string) => {
    if (s.depth === 1) {
      s.topKey = name;
      if (s.verdict === 'pending' && name !== 'result' && !OPENING_KEYS.has(name)) s.verdict = 'other';
    } else {
      s.resultMembers++;
      if (name === 'resultType') s.typed = true;
    }
  };
  const tracksKeys = () => keyDepth(s);

  return {
    get verdict() {
      return s.verdict;
    },
    get ended() {
      return s.ended;
    },
    get read() {
      return s.read;
    },
    feed(chunk) {
      if (s.ended) return [];
      const out: Buffer[] = [];
      let from = 0;
      let keyFrom = 0;
      const seen = { quote: -2, slash: -2 };
      let i = 0;
      for (; i < chunk.length && !s.ended; i++) {
        const byte = chunk[i]!;
        if (s.verdict === 'pending' && s.read + i >= OPENING_MAX_BYTES) s.verdict = 'other';
        if (s.inString) {
          const close = stringClose(chunk, i, s, seen);
          if (close === -1) {
            i = chunk.length;
            break;
          }
          i = close;
          s.inString = false;
          if (key) {
            keySize += i - keyFrom;
            key.push(chunk.subarray(keyFrom, i));
            onKey(keyName(key, keySize));
            key = undefined;
          }
          continue;
        }
        if (byte === QUOTE) {
          s.inString = true;
          if (s.keyNext && tracksKeys()) [key, keySize, keyFrom] = [[], 0, i + 1];
        } else if (structural(s, byte)) {
          // The result closes without having named its type: the member goes in before its brace.
          out.push(chunk.subarray(from, i), s.resultMembers ? MEMBER_AFTER : MEMBER);
          from = i;
        }
      }
      if (key) {
        keySize += i - keyFrom;
        // A key past the bound is none of those looked for: its bytes are not kept.
        key = keySize > KEY_MAX_BYTES ? [] : [...key, chunk.subarray(keyFrom, i)];
      }
      s.read += i;
      if (from < i) out.push(chunk.subarray(from, i));
      return out;
    },
  };
}

/**
 * Where the open string closes in `chunk`, searching from `from`: its quote's index, or -1 when
 * it runs past the chunk (`s.escaped` carries a backslash that ends it over). Only quotes and
 * backslashes matter inside a string, so a 1 MB text costs a few native searches, not a turn of
 * the byte loop per byte; `seen` keeps this chunk's last finds, so many short strings do not
 * search the chunk's tail again each.
 */
function stringClose(chunk: Buffer, from: number, s: ScanState, seen: { quote: number; slash: number }): number {
  let i = from;
  if (s.escaped) {
    if (i >= chunk.length) return -1;
    s.escaped = false;
    i++;
  }
  for (;;) {
    seen.quote = after(chunk, QUOTE, i, seen.quote);
    seen.slash = after(chunk, BACKSLASH, i, seen.slash);
    if (seen.slash === -1 || (seen.quote !== -1 && seen.quote < seen.slash)) return seen.quote;
    if (seen.slash + 1 >= chunk.length) {
      s.escaped = true;
      return -1;
    }
    i = seen.slash + 2;
  }
}

/** The next `needle` at or after `from`, or -1: `known` when it still lies ahead (or none is left), else searched again. */
function after(chunk: Buffer, needle: number, from: number, known: number): number {
  return known === -1 || known >= from ? known : chunk.indexOf(needle, from);
}

/** The verdict when a `{` or `[` opens at `depth`: only the message's own object, then its result, keep it a response. */
function opened(depth: number, byte: number, topKey: string, keyNext: boolean): OpeningVerdict {
  if (depth === 0) return byte === OPEN_BRACE ? 'pending' : 'other';
  return depth === 1 && topKey === 'result' && !keyNext && byte === OPEN_BRACE ? 'response' : 'other';
}

/** A key's name from its raw bytes (escapes decoded); a key too long to matter is ''. */
function keyName(parts: Buffer[], size: number): string {
  if (size > KEY_MAX_BYTES) return '';
  const raw = Buffer.concat(parts).toString('utf8');
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return '';
  }
}

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0a;
}
