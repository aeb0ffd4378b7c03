/**
 * The MCP semantic conventions' span names and attributes of one JSON-RPC message
 * (`docs/gen-ai/mcp.md` of open-telemetry/semantic-conventions-genai, "Client" and "Server"
 * spans), read from what the gateway already parsed: nothing else of the message is looked at.
 */
import type { JsonRpcMessage } from '../wire/jsonrpc.js';

export type Attributes = Record<string, string | number | boolean>;

/** Methods whose `params.uri` is `mcp.resource.uri` (the convention's note [4]). */
const URI_METHODS: ReadonlySet<string> = new Set(['resources/read', 'resources/subscribe', 'resources/unsubscribe', 'notifications/resources/updated']);

/**
 * Span name `{mcp.method.name} {target}` — target the tool or prompt name, else the method
 * alone (the resource URI is not a target by default: high cardinality) — and the attributes
 * the message itself gives.
 */
export function describeMessage(m: JsonRpcMessage): { name: string; attributes: Attributes } {
  const method = m.method ?? '';
  const params = (m.params ?? {}) as Record<string, unknown>;
  const attributes: Attributes = { 'mcp.method.name': method };
  let target: string | undefined;
  if (method === 'tools/call' && typeof params.name === 'string') {
    target = params.name;
    attributes['gen_ai.tool.name'] = target;
    // Only on tools/call (the convention's note: SHOULD NOT be set otherwise).
    attributes['gen_ai.operation.name'] = 'execute_tool';
  } else if (method === 'prompts/get' && typeof params.name === 'string') {
    target = params.name;
    attributes['gen_ai.prompt.name'] = target;
  }
  if (URI_METHODS.has(method) && typeof params.uri === 'string') attributes['mcp.resource.uri'] = params.uri;
  // Not captured for a null or absent id (the convention's note on jsonrpc.request.id).
  if (typeof m.id === 'string' || typeof m.id === 'number') attributes['jsonrpc.request.id'] = String(m.id);
  return { name: target === undefined ? method : `${method} ${target}`, attributes };
}

/**
 * The outcome of a response: a JSON-RPC error sets `error.type` and `rpc.response.status_code`
 * to its code (as a string) and the status description to its message; a tool result with
 * `isError: true` sets `error.type` to `tool_error`. Undefined for a success.
 */
export function responseError(m: JsonRpcMessage): { attributes: Attributes; message?: string } | undefined {
  if (m.error) {
    const code = String(m.error.code);
    return { attributes: { 'error.type': code, 'rpc.response.status_code': code }, message: typeof m.error.message === 'string' ? m.error.message : undefined };
  }
  const result = m.result as { isError?: unknown } | undefined;
  if (result?.isError === true) return { attributes: { 'error.type': 'tool_error' } };
  return undefined;
}

/**
 * The attributes of a span the convention keeps on its duration metrics (no session id, URI or
 * request id), in the order the metric's attributes list them (duration-histogram.ts reads these
 * keys straight from a span's attributes).
 */
export const METRIC_KEYS: readonly string[] = [
  'mcp.method.name', 'gen_ai.tool.name', 'gen_ai.prompt.name', 'gen_ai.operation.name', 'error.type', 'rpc.response.status_code',
  'mcp.protocol.version', 'network.transport', 'network.protocol.name', 'network.protocol.version', 'server.address', 'server.port', 'switchboard.backend',
];

export function metricAttributes(span: Attributes): Attributes {
  const out: Attributes = {};
  for (const key of METRIC_KEYS) if (span[key] !== undefined) out[key] = span[key]!;
  return out;
}

/** JSON of a tool's arguments or result for the opt-in content attributes, cut at `maxBytes`. */
export function cappedJson(value: unknown, maxBytes: number): string {
  const json = JSON.stringify(value) ?? 'null';
  if (Buffer.byteLength(json) <= maxBytes) return json;
  return `${Buffer.from(json).subarray(0, maxBytes).toString('utf8')}…[truncated]`;
}

/** `server.address` and `server.port` of a backend URL (the port its scheme implies when absent). */
export function serverOf(url: string | undefined): Attributes {
  if (!url || !URL.canParse(url)) return {};
  const u = new URL(url);
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  return { 'server.address': u.hostname.replace(/^\[|\]$/g, ''), 'server.port': port };
}
