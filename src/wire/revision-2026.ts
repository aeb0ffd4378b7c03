/**
 * The words of MCP 2026-07-28, the stateless revision: no `initialize`, no session; every
 * request carries its revision and the client's capabilities in `params._meta` and mirrors
 * its method and name into headers (changelog, major changes 1–5; basic/index §`_meta`).
 *
 * The gateway serves it beside 2025-11-25 on the same endpoint and picks the era per request
 * ({@link requestEra}; basic/versioning §Backward Compatibility: "a request carrying modern
 * per-request `_meta` is served statelessly … an `initialize` request selects legacy
 * semantics").
 */
import type { JsonRpcMessage } from './jsonrpc.js';
import { HEADER, SUPPORTED_PROTOCOL_VERSIONS } from './protocol.js';
import { encodeHeaderValue } from './header-encoding.js';

export const STATELESS_REVISION = '2026-07-28';
/** The revisions the gateway serves without a session, newest first (what `server/discover` lists). */
export const STATELESS_REVISIONS: readonly string[] = [STATELESS_REVISION];

/**
 * The revisions that open a session with `initialize` (basic/versioning §Terminology,
 * "Legacy"), 2024-11-05 included: a header naming one of them keeps a request in the legacy
 * era even where the gateway no longer serves it, so it gets the legacy answer it understands.
 */
export const LEGACY_REVISIONS: readonly string[] = [...SUPPORTED_PROTOCOL_VERSIONS, '2024-11-05'];

/** Reserved `_meta` keys (basic/index §`_meta`, "Reserved keys"). */
export const META = {
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
} as const;

/** `LoggingLevel` (schema reference), the values `io.modelcontextprotocol/logLevel` may take. */
export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The client→server methods of 2026-07-28 (schema reference): the requests, and the one
 * notification (`notifications/cancelled`, which Streamable HTTP does not expect — closing
 * the response stream cancels — but a client may still post).
 */
export const STATELESS_METHODS: ReadonlySet<string> = new Set([
  'server/discover',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'completion/complete',
  'subscriptions/listen',
  'notifications/cancelled',
]);

/**
 * Methods of official extensions a client may call once it declares the extension
 * (basic/versioning §Extension Negotiation): the tasks extension (SEP-2663, changelog major
 * change 6). The gateway passes them to the backend, which knows whether it speaks the
 * extension; only their `Mcp-Name` source is the gateway's business ({@link nameFieldOf}).
 */
export const EXTENSION_METHODS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

/**
 * Client→server methods of 2025-11-25 that 2026-07-28 removed (changelog: major changes 2, 4,
 * 5, 6; minor change 11 removed only server→client words). A 2026 request naming one gets
 * 404 -32601 like any unknown method; the list gives the answer a better message.
 */
export const REMOVED_IN_2026: ReadonlySet<string> = new Set([
  'initialize',
  'notifications/initialized',
  'ping',
  'logging/setLevel',
  'resources/subscribe',
  'resources/unsubscribe',
  'notifications/roots/list_changed',
  'tasks/list',
  'tasks/result',
]);

/**
 * The `params` field `Mcp-Name` mirrors for a method (Transports §Standard Request Headers;
 * `tasks/*` per SEP-2663 §Routing Headers), or undefined for a method that carries no name.
 */
export function nameFieldOf(method: string): 'name' | 'uri' | 'taskId' | undefined {
  switch (method) {
    case 'tools/call':
    case 'prompts/get':
      return 'name';
    case 'resources/read':
      return 'uri';
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel':
      return 'taskId';
    default:
      return undefined;
  }
}

/** The request's `params._meta` when it is an object. */
export function metaOf(message: JsonRpcMessage | undefined): Record<string, unknown> | undefined {
  const params = message?.params;
  if (!params || typeof params !== 'object' || Array.isArray(params)) return undefined;
  const meta = (params as { _meta?: unknown })._meta;
  return meta && typeof meta === 'object' && !Array.isArray(meta) ? (meta as Record<string, unknown>) : undefined;
}

/**
 * Which era serves one POSTed message (or, without one, a GET or DELETE), from the
 * MCP-Protocol-Version header and the body:
 *
 * - A body whose `_meta` claims a revision (the reserved protocol-version key, with any value
 *   but a legacy revision) is stateless whatever the header says: the body is what a server
 *   executes, so a legacy or absent header beside it is a -32020 mismatch to report, not a
 *   reason to serve the body under legacy rules. That includes `initialize` with such a claim,
 *   which the stateless era answers 404 -32601.
 * - Otherwise the header decides: absent (2025-03-26 by default) or a legacy revision is
 *   legacy — `initialize` without a header opens a session as before; any other value is
 *   stateless, so `2026-07-28` without `_meta` is answered -32602 and an unknown revision,
 *   past or future (`1900-01-01`, `2027-…`), -32022 with the revisions served, which a
 *   dual-era client reads as "this server is modern" (Transports §Backward Compatibility).
 *
 * A response or a batch is never a 2026 message; the stateless check refuses the first
 * (-32600), and `parseMessages` refuses a batch wherever the header is not 2025-03-26.
 */
export function requestEra(versionHeader: string | undefined, message?: JsonRpcMessage): 'stateless' | 'legacy' {
  const meta = metaOf(message);
  if (meta && META.protocolVersion in meta) {
    const claimed = meta[META.protocolVersion];
    if (typeof claimed !== 'string' || !LEGACY_REVISIONS.includes(claimed)) return 'stateless';
  }
  const header = versionHeader?.trim();
  if (header === undefined || header === '' || LEGACY_REVISIONS.includes(header)) return 'legacy';
  return 'stateless';
}

/**
 * The standard request headers a transport without per-message headers (the gateway's
 * WebSocket, which replays each message to the HTTP endpoint) derives from a stateless-era
 * message's own body: `MCP-Protocol-Version` from `_meta`, `Mcp-Method`, and `Mcp-Name` where the
 * method names something (Transports §Standard Request Headers). Undefined for a message of
 * the legacy era.
 */
export function standardHeadersOf(message: JsonRpcMessage): Record<string, string> | undefined {
  const version = metaOf(message)?.[META.protocolVersion];
  if (typeof version !== 'string' || LEGACY_REVISIONS.includes(version) || typeof message.method !== 'string') return undefined;
  const headers: Record<string, string> = { [HEADER.protocolVersion]: version, [HEADER.method]: message.method };
  const field = nameFieldOf(message.method);
  const value = field ? (message.params as Record<string, unknown>)[field] : undefined;
  if (typeof value === 'string') headers[HEADER.name] = encodeHeaderValue(value);
  return headers;
}
