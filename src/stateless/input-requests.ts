/**
 * A 2025-11-25 backend's server→client requests, as the 2026-07-28 revision carries them: the
 * entries of an `input_required` result's `inputRequests` (MCP 2026-07-28 "Multi Round-Trip
 * Requests"), and the client's `inputResponses` turned back into the JSON-RPC responses the
 * backend waits for (issue 15, "Bridging").
 *
 * A 2025 server's request has no key of its own, only a JSON-RPC id; the gateway names each
 * one after its kind and that id (`elicitation-3`), unique within the call — unless the backend
 * names it in the request's `_meta` under {@link INPUT_KEY_META} (a Switchboard extension, for
 * backends written for both eras that want the key a 2026 server of theirs would use: the
 * conformance suite's `user_name`). A name that is malformed, reserved or already taken in the
 * same round falls back to the generated one; the hint is taken off the request. The client's
 * answer to an input request is the very result the backend's request expects
 * (`ElicitResult`, `CreateMessageResult`, `ListRootsResult`), so it is sent on unchanged.
 *
 * Only what the client declared may be asked (MRTR §Server Requirements 7): a request for an
 * undeclared capability is the -32021 the revision defines, with `requiredCapabilities`.
 */
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import { missingCapabilities } from '../wire/stateless-request.js';
import type { BackendMessage } from '../backends/backend-messages.js';

/** Where a 2025 backend may name the input key of its request (see the module comment). */
export const INPUT_KEY_META = 'io.switchboard/input-key';

/** A key a backend may choose: short, printable, not one of the gateway's own (`io.switchboard/…`). */
const CHOSEN_KEY = /^(?!io\.switchboard\/)[A-Za-z0-9_.\/-]{1,64}$/;

/** One server→client request the backend is waiting on. */
export interface PendingAsk {
  key: string;
  backendId: JsonRpcId;
  method: string;
  params: Record<string, unknown>;
}

/** The requests a 2026 client can answer as input (MRTR §Supported Input Requests), by the kind that names their keys. */
const ASKABLE: Readonly<Record<string, string>> = { 'elicitation/create': 'elicitation', 'sampling/createMessage': 'sampling', 'roots/list': 'roots' };

export type AskVerdict = { kind: 'ask'; ask: PendingAsk } | { kind: 'answer'; response: BackendMessage } | { kind: 'missing'; required: Record<string, unknown> };

/**
 * What to do with one backend request: ask the client, answer it here (`ping`; methods a 2026
 * client cannot be asked get -32601, so the backend's handler fails instead of waiting), or
 * refuse the call for a capability the client did not declare.
 */
export function judgeServerRequest(message: BackendMessage, clientCapabilities: Record<string, unknown>, takenKeys: ReadonlySet<string> = new Set()): AskVerdict {
  const id = message.id as JsonRpcId;
  const method = String(message.method);
  const params = (message.params as Record<string, unknown> | undefined) ?? {};
  if (method === 'ping') return { kind: 'answer', response: { jsonrpc: '2.0', id, result: {} } };
  const kind = ASKABLE[method];
  if (!kind) return { kind: 'answer', response: errorResponse(id, ErrorCode.MethodNotFound, `"${method}" cannot be asked of a client of MCP 2026-07-28`) as unknown as BackendMessage };
  const missing = missingCapabilities(clientCapabilities, requiredFor(method, params));
  if (missing) return { kind: 'missing', required: missing };
  const { key: chosen, params: sent } = chosenKey(params);
  const key = chosen !== undefined && !takenKeys.has(chosen) ? chosen : `${kind}-${String(id)}`;
  return { kind: 'ask', ask: { key, backendId: id, method, params: sent } };
}

/** The key the backend chose in `_meta`, if well formed, and the params without that hint. */
function chosenKey(params: Record<string, unknown>): { key?: string; params: Record<string, unknown> } {
  const meta = params._meta;
  if (!meta || typeof meta !== 'object' || !(INPUT_KEY_META in meta)) return { params };
  const { [INPUT_KEY_META]: hint, ...rest } = meta as Record<string, unknown>;
  const { _meta: _dropped, ...others } = params;
  const cleaned = Object.keys(rest).length ? { ...others, _meta: rest } : others;
  return { key: typeof hint === 'string' && CHOSEN_KEY.test(hint) ? hint : undefined, params: cleaned };
}

function requiredFor(method: string, params: Record<string, unknown>): Record<string, unknown> {
  if (method === 'elicitation/create') return { elicitation: params.mode === 'url' ? { url: {} } : { form: {} } };
  if (method === 'sampling/createMessage') return params.tools ? { sampling: { tools: {} } } : { sampling: {} };
  return { roots: {} };
}

/** The `inputRequests` map of an `input_required` result. */
export function inputRequestsOf(asks: readonly PendingAsk[]): Record<string, { method: string; params: Record<string, unknown> }> {
  return Object.fromEntries(asks.map((ask) => [ask.key, { method: ask.method, params: ask.params }]));
}

/** The backend's answers among the client's `inputResponses`, and the asks still unanswered (extra keys are ignored, MRTR §Client Requirements). */
export function answersFrom(asks: readonly PendingAsk[], inputResponses: unknown): { responses: BackendMessage[]; unanswered: PendingAsk[] } {
  const given = inputResponses && typeof inputResponses === 'object' ? (inputResponses as Record<string, unknown>) : {};
  const responses: BackendMessage[] = [];
  const unanswered: PendingAsk[] = [];
  for (const ask of asks) {
    const answer = given[ask.key];
    if (answer && typeof answer === 'object') responses.push({ jsonrpc: '2.0', id: ask.backendId, result: answer });
    else unanswered.push(ask);
  }
  return { responses, unanswered };
}

/** The answer a backend gets for a request the client will never answer (the call was cancelled or expired). */
export function abandoned(ask: PendingAsk, why: string): BackendMessage {
  return errorResponse(ask.backendId, ErrorCode.InternalError, why) as unknown as BackendMessage;
}
