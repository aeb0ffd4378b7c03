/**
 * The MCP semantic conventions' span names and attributes of one JSON-RPC message
 * (`docs/gen-ai/mcp.md` of open-telemetry/semantic-conventions-genai, "Client" and "Server"
 * spans), read from what the gateway already parsed: nothing else of the message is looked at.
 */
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { SLOT, SpanAttributes, type SpanKey } from './span-attributes.js';

export type Attributes = Record<string, string | number | boolean>;

/** Methods whose `params.uri` is `mcp.resource.uri` (the convention's note [4]). */
const URI_METHODS: ReadonlySet<string> = new Set(['resources/read', 'resources/subscribe', 'resources/unsubscribe', 'notifications/resources/updated']);

/**
 * Span name `{mcp.method.name} {target}` — target the tool or prompt name, else the method
 * alone (the resource URI is not a target by default: high cardinality) — and the attributes
 * the message itself gives, in a span's layout (span-attributes.ts).
 */
export function describeMessage(m: JsonRpcMessage): { name: string; attributes: SpanAttributes } {
  const method = m.method ?? '';
  const params = (m.params ?? {}) as Record<string, unknown>;
  const attributes = new SpanAttributes();
  const values = attributes.values;
  values[SLOT['mcp.method.name']] = method;
  let target: string | undefined;
  if (method === 'tools/call' && typeof params.name === 'string') {
    target = params.name;
    values[SLOT['gen_ai.tool.name']] = target;
    // Only on tools/call (the convention's note: SHOULD NOT be set otherwise).
    values[SLOT['gen_ai.operation.name']] = 'execute_tool';
  } else if (method === 'prompts/get' && typeof params.name === 'string') {
    target = params.name;
    values[SLOT['gen_ai.prompt.name']] = target;
  }
  if (URI_METHODS.has(method) && typeof params.uri === 'string') values[SLOT['mcp.resource.uri']] = params.uri;
  // Not captured for a null or absent id (the convention's note on jsonrpc.request.id).
  if (typeof m.id === 'string' || typeof m.id === 'number') values[SLOT['jsonrpc.request.id']] = String(m.id);
  return { name: target === undefined ? method : spanName(method, target), attributes };
}

/*
 * The last span name made, and of what: a call's SERVER and CLIENT spans, and most calls after
 * them, are named alike, so the same string is handed out again rather than joined anew — one
 * string, flattened once, which the encoder then finds kept by identity (ops/kept-encodings.ts)
 * instead of flattening and comparing a new join each span (issue 44 part 1). One entry: a name of
 * other parts replaces it.
 */
let lastMethod = '';
let lastTarget = '';
let lastName = '';

/** `method target`, the convention's span name for a call with a target (a tool, a prompt). */
function spanName(method: string, target: string): string {
  if (method !== lastMethod || target !== lastTarget) {
    lastMethod = method;
    lastTarget = target;
    lastName = `${method} ${target}`;
  }
  return lastName;
}

/**
 * The outcome of a response: a JSON-RPC error sets `error.type` and `rpc.response.status_code`
 * to its code (as a string) and the status description to its message; a tool result with
 * `isError: true` sets `error.type` to `tool_error`. Undefined for a success.
 */
export function responseError(m: JsonRpcMessage): { type: string; statusCode?: string; message?: string } | undefined {
  if (m.error) {
    const code = String(m.error.code);
    return { type: code, statusCode: code, message: typeof m.error.message === 'string' ? m.error.message : undefined };
  }
  const result = m.result as { isError?: unknown } | undefined;
  if (result?.isError === true) return { type: 'tool_error' };
  return undefined;
}

/**
 * The attributes of a span the convention keeps on its duration metrics (no session id, URI or
 * request id), in the order the metric's attributes list them.
 */
export const METRIC_KEYS: readonly SpanKey[] = [
  'mcp.method.name', 'gen_ai.tool.name', 'gen_ai.prompt.name', 'gen_ai.operation.name', 'error.type', 'rpc.response.status_code',
  'mcp.protocol.version', 'network.transport', 'network.protocol.name', 'network.protocol.version', 'server.address', 'server.port', 'switchboard.backend',
];

/** Where each of {@link METRIC_KEYS} is in a span's layout: what the duration histograms read (duration-histogram.ts). */
export const METRIC_SLOTS: readonly number[] = METRIC_KEYS.map((key) => SLOT[key]);

/** A span's metric attributes as an object (what the SDK's histogram was given per record: the tests' reference). */
export function metricAttributes(span: SpanAttributes): Attributes {
  const out: Attributes = {};
  for (const key of METRIC_KEYS) if (span.get(key) !== undefined) out[key] = span.get(key)!;
  return out;
}

/** JSON of a tool's arguments or result for the opt-in content attributes, cut at `maxBytes`. */
export function cappedJson(value: unknown, maxBytes: number): string {
  const json = JSON.stringify(value) ?? 'null';
  if (Buffer.byteLength(json) <= maxBytes) return json;
  return `${Buffer.from(json).subarray(0, maxBytes).toString('utf8')}…[truncated]`;
}

/** `server.address` and `server.port` of a backend URL (the port its scheme implies when absent). */
export function serverOf(url: string | undefined): { 'server.address'?: string; 'server.port'?: number } {
  if (!url || !URL.canParse(url)) return {};
  const u = new URL(url);
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  return { 'server.address': u.hostname.replace(/^\[|\]$/g, ''), 'server.port': port };
}
