/**
 * What the audit trail (ops/audit.ts) records of a request, taken from the backend call's
 * caller and the JSON-RPC message: the user (the principal's digest and the claims the
 * operator listed — the Audit picks them, and the tenant), the gateway
 * session, the endpoint path, the tool, prompt or URI and their arguments, and the W3C trace
 * id (issue 30 §2: the SERVER span's when `telemetry` is on, else `params._meta.traceparent`,
 * else the `traceparent` header). Nothing else of the request is read: no header but
 * `traceparent`, never the token.
 */
import type { Principal } from '../auth/principal.js';
import type { BackendCaller } from '../backends/backend.js';
import { traceIdOf, type AuditEvent, type AuditRequest } from '../ops/audit.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import type { RequestFacts } from './policy-input.js';

/** The methods that get a record when allowed; every refusal gets one whatever its method. */
export const AUDITED_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read', 'resources/subscribe']);

/** The facts a policy and a record read from one request message. */
export function requestFacts(m: JsonRpcMessage, backend: string): RequestFacts {
  const params = (m.params ?? {}) as Record<string, unknown>;
  const name = typeof params.name === 'string' ? params.name : undefined;
  // Each kind made whole by one literal: no object grown key by key (issue 44 part 1).
  if (m.method === 'tools/call') return { method: m.method, backend, tool: name ?? '', arguments: params.arguments ?? {} };
  if (m.method === 'prompts/get') return { method: m.method, backend, prompt: name ?? '', arguments: params.arguments ?? {} };
  if (typeof params.uri === 'string') return { method: m.method ?? '', backend, uri: params.uri };
  return { method: m.method ?? '', backend };
}

/** The part of a record that says who asked, where and what (decision and outcome to add). */
export function auditBase(principal: Principal, request: Pick<BackendCaller, 'headers' | 'url' | 'trace'>, facts: Partial<RequestFacts>, message?: JsonRpcMessage, session?: string): AuditRequest {
  return {
    userKey: principal.userKey,
    claims: principal.claims,
    session,
    endpoint: request.url === undefined ? undefined : pathOf(request.url),
    backend: facts.backend,
    method: facts.method,
    requestId: message?.id,
    tool: facts.tool,
    prompt: facts.prompt,
    uri: facts.uri,
    arguments: facts.arguments,
    traceId: request.trace?.traceId || traceIdOf((message?.params as { _meta?: unknown } | undefined)?._meta, request.headers?.traceparent),
  };
}

/** A URL's path, without its query. */
function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

/** A backend call's request part, made once when the request is judged (its record's verdict comes later). */
export function callerBase(caller: BackendCaller, facts: RequestFacts, message: JsonRpcMessage): AuditRequest {
  return auditBase(caller.principal, caller, facts, message, caller.sessionId);
}

/** The outcome of a response message: ok, a tool's `isError`, or the JSON-RPC error code. */
export function outcomeOf(m: JsonRpcMessage): Pick<AuditEvent, 'outcome' | 'code'> {
  if (m.error) return { outcome: 'error', code: typeof m.error.code === 'number' ? m.error.code : undefined };
  const result = m.result as { isError?: unknown } | undefined;
  return { outcome: result?.isError === true ? 'isError' : 'ok' };
}
