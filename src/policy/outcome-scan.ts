/**
 * The audit's outcome of a response message read from its text without parsing it (issue 30
 * "Cost": with `audit` on, JSON.parse of every answer, and the stream made to carry the parsed
 * answer on, were most of the +55–70 µs a call cost). The record needs only four things of a
 * JSON-RPC response: its `id` (to match the request), whether it has a `method` (then it is not
 * a response), `error.code`, and `result.isError` (MCP 2025-11-25 Tools, "Error Handling": a
 * tool's failure is a result with `isError: true`). The telemetry's spans read it too, and take
 * `error.message` besides for the span status's description (telemetry/otel-sdk.ts).
 *
 * One pass over the text that skips string contents with `indexOf`, tracking depth, so only
 * keys of the top-level object and of its `result` / `error` objects are looked at: the same
 * bytes inside a string (a tool's text quoting JSON) or deeper (a nested `error`) count for
 * nothing. Anything but one well-formed object (a batch array, truncated text) gives undefined,
 * and the caller parses instead. Duplicate keys: the last one wins, as with JSON.parse.
 */
import { isSpace, skipSpace, stringEnd } from '../wire/json-scan.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** Stands for a value that is an object or an array (not read further here). */
const OBJECT = Symbol('object');

/** What the audit reads of a response, shaped as the message it stands for. */
export type ScannedMessage = Pick<JsonRpcMessage, 'id' | 'method'> & { result?: { isError?: true }; error?: { code?: number; message?: string } };

/** The literal or number starting at `i` (up to `,` `}` `]` or space), as text. */
function bareValue(text: string, i: number): string {
  let j = i;
  for (; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c)) break;
  }
  return text.slice(i, j);
}

/** The value at `i` when it is a string, number or null (JSON-RPC ids, `method`, `code`, `isError`). */
function scalarAt(text: string, i: number): unknown {
  if (text.charCodeAt(i) === QUOTE) {
    const end = stringEnd(text, i);
    return end < 0 ? undefined : JSON.parse(text.slice(i, end + 1));
  }
  const bare = bareValue(text, i);
  if (bare === 'true') return true;
  if (bare === 'null') return null;
  const n = Number(bare);
  return bare && Number.isFinite(n) ? n : undefined;
}

/** Reads a key of the top-level object (depth 1) or of its `result` / `error` object (depth 2). */
function readKey(out: ScannedMessage, key: string, parent: string | undefined, depth: number, value: unknown): void {
  if (depth === 1) {
    if (key === 'id') out.id = typeof value === 'string' || typeof value === 'number' ? value : null;
    else if (key === 'method') out.method = typeof value === 'string' ? value : '';
    // Only an object (or array) counts, as `m.error` truthy does for JSON.parse's message.
    else if (key === 'result') out.result = value === OBJECT ? {} : undefined;
    else if (key === 'error') out.error = value === OBJECT ? {} : undefined;
  } else if (parent === 'result' && key === 'isError') out.result = value === true ? { isError: true } : {};
  else if (parent === 'error' && key === 'code') out.error = { ...out.error, code: typeof value === 'number' ? value : undefined };
  // The span status's description (telemetry/otel-sdk.ts), as JSON.parse's message gives it.
  else if (parent === 'error' && key === 'message') out.error = { ...out.error, message: typeof value === 'string' ? value : undefined };
}

/**
 * The name of the key whose quotes are at `start` and `end`: the text between them as it is,
 * unless it holds an escape — then as JSON.parse reads it (issue 44 part 1: a JSON.parse per
 * key was the scan's largest cost).
 */
function keyText(text: string, start: number, end: number): string {
  for (let j = start + 1; j < end; j++) if (text.charCodeAt(j) === BACKSLASH) return JSON.parse(text.slice(start, end + 1)) as string;
  return text.slice(start + 1, end);
}

/** The message's audit facts, or undefined when the text is not one complete JSON object. */
export function scanResponse(text: string): ScannedMessage | undefined {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== 0x7b) return undefined;
  const out: ScannedMessage = {};
  let depth = 0;
  let key1: string | undefined; // the last key seen at depth 1: names the object opened under it
  let parent: string | undefined; // the depth-1 key whose object is open (depth 2)
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end < 0) return undefined;
      const after = skipSpace(text, end + 1);
      if (text.charCodeAt(after) === 0x3a && depth <= 2) {
        const key = keyText(text, i, end);
        if (depth === 1) key1 = key;
        const v = skipSpace(text, after + 1);
        const wanted = depth === 1 ? key === 'id' || key === 'method' || key === 'result' || key === 'error' : (parent === 'result' && key === 'isError') || (parent === 'error' && (key === 'code' || key === 'message'));
        if (wanted) readKey(out, key, parent, depth, text.charCodeAt(v) === 0x7b || text.charCodeAt(v) === 0x5b ? OBJECT : scalarAt(text, v));
        i = after;
      } else i = end;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth === 2) parent = c === 0x7b ? key1 : undefined;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 1) parent = undefined;
      if (depth === 0) return skipSpace(text, i + 1) === text.length ? out : undefined;
    }
  }
  return undefined;
}
