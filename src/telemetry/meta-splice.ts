/**
 * The CLIENT span's W3C context put into a request's `params._meta` (MCP semantic conventions,
 * "Context propagation"; SEP-414: unprefixed `traceparent`, `tracestate`, `baggage`), by
 * writing the members into the request's text where they go rather than parsing it and writing
 * it whole again (issue 30 "Cost": with `telemetry` on, each call paid for the stringify).
 *
 * The text is spliced when that is safe to tell without a parse of its own (the caller has the
 * parsed message already, and reads what it needs of it from there):
 * - one object, no `\u` escape anywhere (the one way to spell `params` or `_meta` otherwise);
 * - `params` absent, or an object; its `_meta` absent, or an object without any of the three keys.
 * Otherwise — a batch, a `_meta` that carries a context the gateway's span must replace (it is
 * that span's parent now), a `params` that is not an object — the message is written again from
 * the parsed one ({@link withMeta}). Either way the result parses to the same message.
 */
import type { TraceHeaders } from '../backends/backend.js';
import { objectMember, skipSpace } from '../wire/json-scan.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { jsonString } from './otlp-json-values.js';

const TRACE_KEYS = ['traceparent', 'tracestate', 'baggage'] as const;

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * `text`, the JSON of `message`, with `trace` in its `params._meta`: spliced when safe, else
 * written again. `paramsName`: where the route's scan of this very text saw the top-level
 * `params` name end (wire/json-guard.ts topParamsName), so its value is found without a walk of
 * the text; -1 or absent: none seen, or not known (the text is walked).
 */
export function withTraceMetaText(text: string, message: JsonRpcMessage, trace: TraceHeaders, paramsName = -1): string {
  const members = traceMembers(trace);
  // `_meta` absent from the parsed `params`: absent from its text too (no `\u` escape spells it otherwise), so not looked for.
  const metaAbsent = (message.params as { _meta?: unknown } | undefined)?._meta === undefined;
  const spliced = members && safeToSplice(text, message) ? splice(text, members, metaAbsent, paramsName) : undefined;
  return spliced ?? JSON.stringify(withMeta(message, trace));
}

/** `"traceparent":…,"tracestate":…,"baggage":…` of the context's keys that have a value, as JSON.stringify writes them. */
function traceMembers(trace: TraceHeaders): string {
  let out = '';
  for (const key of TRACE_KEYS) {
    const value = trace[key];
    if (value) out += `${out ? ',' : ''}"${key}":${jsonString(value)}`;
  }
  return out;
}

function safeToSplice(text: string, message: JsonRpcMessage): boolean {
  if (text.includes('\\u')) return false;
  if (message.params === undefined) return true;
  if (!isPlainObject(message.params)) return false;
  const meta = message.params._meta;
  if (meta === undefined) return true;
  return isPlainObject(meta) && !TRACE_KEYS.some((k) => k in meta);
}

/** The text with `members` written into `params._meta` (made where missing); undefined when its shape is not as parsed. */
function splice(text: string, members: string, metaAbsent: boolean, paramsName: number): string | undefined {
  const top = skipSpace(text, 0);
  if (text.charCodeAt(top) !== 0x7b) return undefined;
  const params = paramsAt(text, paramsName) ?? objectMember(text, top, 'params');
  if (!params) return undefined;
  if (params.value === undefined) {
    const empty = skipSpace(text, top + 1) === params.close;
    return insert(text, params.close, `${empty ? '' : ','}"params":{"_meta":{${members}}}`);
  }
  if (text.charCodeAt(params.value) !== 0x7b) return undefined;
  if (metaAbsent) return insert(text, params.value + 1, `"_meta":{${members}}${emptyAt(text, params.value) ? '' : ','}`);
  const meta = objectMember(text, params.value, '_meta');
  if (!meta) return undefined;
  if (meta.value === undefined) return insert(text, params.value + 1, `"_meta":{${members}}${emptyAt(text, params.value) ? '' : ','}`);
  if (text.charCodeAt(meta.value) !== 0x7b) return undefined;
  return insert(text, meta.value + 1, `${members}${emptyAt(text, meta.value) ? '' : ','}`);
}

/**
 * The `params` member whose name the route's scan saw close at `nameEnd`: its value's first
 * index. Undefined when not known, or when the text there is not `"params"` and a colon (then the
 * text is walked, as without it).
 */
function paramsAt(text: string, nameEnd: number): { value: number; close: number } | undefined {
  if (nameEnd < 7 || text.charCodeAt(nameEnd) !== 0x22 || text.charCodeAt(nameEnd - 7) !== 0x22 || !text.startsWith('params', nameEnd - 6)) return undefined;
  const colon = skipSpace(text, nameEnd + 1);
  if (text.charCodeAt(colon) !== 0x3a /* : */) return undefined;
  // `close` (the top object's closing brace) is read only when `params` is absent, never here.
  return { value: skipSpace(text, colon + 1), close: -1 };
}

/** Whether the object opening at `open` has no members. */
const emptyAt = (text: string, open: number) => text.charCodeAt(skipSpace(text, open + 1)) === 0x7d;

const insert = (text: string, at: number, what: string) => `${text.slice(0, at)}${what}${text.slice(at)}`;

/** The message with the span's context in `params._meta` (unprefixed keys, SEP-414), other `_meta` keys kept. */
export function withMeta(m: JsonRpcMessage, trace: TraceHeaders): JsonRpcMessage {
  const params = (m.params && typeof m.params === 'object' ? m.params : {}) as Record<string, unknown>;
  const meta = params._meta && typeof params._meta === 'object' ? (params._meta as Record<string, unknown>) : {};
  const carried: Record<string, string> = {};
  for (const key of TRACE_KEYS) if (trace[key]) carried[key] = trace[key]!;
  // The gateway's span replaces the context the client put there: it is that span's parent now.
  const rest = Object.fromEntries(Object.entries(meta).filter(([k]) => !(TRACE_KEYS as readonly string[]).includes(k)));
  return { ...m, params: { ...params, _meta: { ...rest, ...carried } } };
}
