/**
 * Just enough JSON-RPC 2.0 to route MCP messages. Messages are otherwise opaque: unknown
 * methods and fields pass through untouched (SPEC §1, forward compatibility).
 */
import { jsonShapeProblem, MAX_JSON_DEPTH } from './json-guard.js';

export type JsonRpcId = string | number;

export interface JsonRpcMessage {
  jsonrpc: '2.0';
  id?: JsonRpcId | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** JSON-RPC 2.0 §5.1 codes, and the gateway's own in the implementation-defined range. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** The backend could not be reached or answered with an HTTP error. */
  BackendUnavailable: -32010,
  /** The backend did not answer within its configured timeout. */
  BackendTimeout: -32011,
  /** The backend's stream ended before it delivered the response. */
  BackendStreamBroken: -32012,
  /** The gateway's state store (Redis) is unavailable; retry later. */
  StateUnavailable: -32013,
  /** A form-only client must link a third-party account at the URL in the message first. */
  AccountLinkRequired: -32014,
  /**
   * The user sent more MCP requests than `limits.rateLimit` allows (HTTP 429, with
   * `Retry-After`; `data.retryAfter` in seconds). -32029 echoes the HTTP status.
   */
  RateLimited: -32029,
  /**
   * The same refusal for MCP 2026-07-28 requests: that revision reserves -32020..-32099 for the
   * specification (basic/index "Error codes"), so its clients get a code from the
   * implementation-defined range instead.
   */
  RateLimitedStateless: -32016,
  /** The backend's access policy (`backends[].access`) does not admit this user (HTTP 403). */
  AccessDenied: -32015,
  /**
   * The user must open a URL first (link a third-party account); `data.elicitations` says
   * where. MCP 2025-11-25 "Elicitation" §"URL Elicitation Required Error", for clients that
   * declared `elicitation.url`.
   */
  UrlElicitationRequired: -32042,
  /**
   * MCP 2026-07-28 (basic/index "Error codes", the sub-range -32020..-32099 reserved for the
   * specification): a standard header is missing, malformed, or disagrees with the body
   * (Transports §Server Validation). HTTP 400.
   */
  HeaderMismatch: -32020,
  /** MCP 2026-07-28: the request needs a client capability its `_meta` did not declare; `data.requiredCapabilities`. HTTP 400. */
  MissingRequiredClientCapability: -32021,
  /** MCP 2026-07-28: the request's protocol version is not served; `data: { supported, requested }`. HTTP 400. */
  UnsupportedProtocolVersion: -32022,
} as const;

export function isRequest(m: JsonRpcMessage): m is JsonRpcMessage & { id: JsonRpcId; method: string } {
  return typeof m.method === 'string' && (typeof m.id === 'string' || typeof m.id === 'number');
}

/** The ids of the requests among `messages` (not notifications or responses), in order. */
export function requestIdsOf(messages: readonly JsonRpcMessage[]): JsonRpcId[] {
  const ids: JsonRpcId[] = [];
  for (const m of messages) if (isRequest(m)) ids.push(m.id);
  return ids;
}

export function isResponse(m: JsonRpcMessage): boolean {
  return m.method === undefined && ('result' in m || 'error' in m);
}

const BATCH_START = /^\s*\[/;

/**
 * True when a JSON text is a batch (an array): its first non-blank character is `[`. An
 * anchored test, so a large body is not copied as `trimStart()` would.
 */
export function isBatchText(text: string): boolean {
  return BATCH_START.test(text);
}

/**
 * The id of the message in a body that is one JSON object with a usable id, else null: the
 * id an error about that body answers (JSON-RPC §5), found without validating the message.
 */
export function idOfJsonText(text: unknown): JsonRpcId | null {
  if (typeof text !== 'string') return null;
  try {
    const id = (JSON.parse(text) as { id?: unknown } | null)?.id;
    return typeof id === 'string' || typeof id === 'number' ? id : null;
  } catch {
    return null;
  }
}

export function errorResponse(id: JsonRpcId | null, code: number, message: string, data?: unknown): JsonRpcMessage {
  return { jsonrpc: '2.0', id, error: data === undefined ? { code, message } : { code, message, data } };
}

/**
 * Thrown for a body that is not a valid JSON-RPC message; becomes HTTP 400. With `id`: a
 * request whose params the gateway refuses (-32602), answered under that id.
 */
export class InvalidMessageError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly id?: JsonRpcId,
  ) {
    super(message);
  }
}

/**
 * The member of `params` that names what a request acts on, for the methods whose target the
 * gateway judges (tool policy, `access.tools.deny`, `policy.rules`, pinning, audit) — issue 41 §5.
 * It must be a string: the judges read anything else as "", and a backend that looks the name
 * up by property (`handlers[name]`) turns `["delete_x"]` back into `"delete_x"`. And the method
 * must be sent as a request: a notification is never judged, and would reach the backend.
 */
const JUDGED_TARGET: ReadonlyMap<string, 'name' | 'uri'> = new Map([
  ['tools/call', 'name'],
  ['prompts/get', 'name'],
  ['resources/read', 'uri'],
  ['resources/subscribe', 'uri'],
  ['resources/unsubscribe', 'uri'],
]);

/**
 * Methods the 2026-07-28 revision removed (SEP-2575: `subscriptions/listen` replaced them): a
 * request of that era gets 404 -32601 for them from the stateless path, whatever its params,
 * so their target is not judged there.
 */
const REMOVED_IN_2026: ReadonlySet<string> = new Set(['resources/subscribe', 'resources/unsubscribe']);

/** Longest member name quoted back in a duplicate-key error. */
const QUOTED_NAME_MAX = 64;

/**
 * Parses a POST body into messages. Batches are accepted only where the client's protocol
 * revision allows them (2025-03-26); later revisions removed JSON-RPC batching.
 *
 * Refused as well (json-guard.ts): nesting deeper than {@link MAX_JSON_DEPTH} (-32700, before
 * the text is parsed) and an object with two members of the same name anywhere in the
 * message (-32600): the gateway decides on the parsed message but forwards the text, and
 * parsers differ on which of two equal names wins. `stateless`: the body is a 2026-07-28 request,
 * whose removed methods are not judged here (see {@link REMOVED_IN_2026}).
 */
export function parseMessages(body: string, allowBatch: boolean, stateless = false): JsonRpcMessage[] {
  const problem = jsonShapeProblem(body);
  if (problem?.kind === 'depth') {
    throw new InvalidMessageError(ErrorCode.ParseError, `Parse error: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw new InvalidMessageError(ErrorCode.ParseError, 'Parse error: body is not valid JSON');
  }
  if (problem) {
    const name = problem.name.length > QUOTED_NAME_MAX ? `${problem.name.slice(0, QUOTED_NAME_MAX)}…` : problem.name;
    throw new InvalidMessageError(ErrorCode.InvalidRequest, `Invalid Request: duplicate key ${JSON.stringify(name)} in one object`);
  }
  if (Array.isArray(value)) {
    if (!allowBatch) throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: JSON-RPC batches are not supported by this protocol revision');
    if (value.length === 0) throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: empty batch');
    return value.map((member) => checkBatchMember(member));
  }
  return [checkMessage(value, stateless)];
}

/** A batch is refused whole (HTTP 400, id null) when one of its messages is, naming the request. */
function checkBatchMember(value: unknown): JsonRpcMessage {
  try {
    return checkMessage(value);
  } catch (err) {
    if (!(err instanceof InvalidMessageError) || err.id === undefined) throw err;
    throw new InvalidMessageError(err.code, `${err.message} (request ${JSON.stringify(err.id)} of the batch; nothing of the batch was sent on)`);
  }
}

function checkMessage(value: unknown, stateless = false): JsonRpcMessage {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: a JSON-RPC message must be an object');
  }
  const m = value as Record<string, unknown>;
  if (m.jsonrpc !== '2.0') throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: "jsonrpc" must be "2.0"');
  const hasId = 'id' in m;
  if (hasId && m.id !== null && typeof m.id !== 'string' && typeof m.id !== 'number') {
    throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: "id" must be a string or a number');
  }
  if ('method' in m) {
    if (typeof m.method !== 'string') throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: "method" must be a string');
    if (hasId && m.id === null) throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: a request id must not be null');
    const target = JUDGED_TARGET.get(m.method);
    if (target !== undefined && !(stateless && REMOVED_IN_2026.has(m.method))) checkTarget(m, m.method, target, hasId);
    return m as unknown as JsonRpcMessage;
  }
  if (hasId && ('result' in m || 'error' in m)) return m as unknown as JsonRpcMessage;
  throw new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request: neither a request, a notification nor a response');
}

/** A judged method: sent as a request, with its target a string (see {@link JUDGED_TARGET}). */
function checkTarget(m: Record<string, unknown>, method: string, member: 'name' | 'uri', hasId: boolean): void {
  if (!hasId) throw new InvalidMessageError(ErrorCode.InvalidRequest, `Invalid Request: ${method} must be sent as a request, with an id; a notification of it is not forwarded`);
  const params = m.params;
  const value = params !== null && typeof params === 'object' && !Array.isArray(params) ? (params as Record<string, unknown>)[member] : undefined;
  if (typeof value !== 'string') throw new InvalidMessageError(ErrorCode.InvalidParams, `Invalid params: ${method} needs params.${member} as a string`, m.id as JsonRpcId);
}
