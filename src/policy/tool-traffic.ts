/**
 * The tool policy (tool-policy.ts) applied to the messages of one POST to a backend (through
 * tool-policy-backend.ts, on `/mcp/{backend}` and for the members of `/mcp` alike):
 * before the backend is called, calls to hidden tools are taken out and answered by the
 * gateway; after it answered, `tools/list` results lose the hidden tools.
 *
 * - A single `tools/call` for a hidden tool never reaches the backend: it is answered at once,
 *   as application/json, with the MCP spec's unknown-tool error (-32602 "Unknown tool: <name>",
 *   2025-11-25 "Tools" → "Error Handling"). The answer is the same whether or not the backend
 *   has such a tool, so the policy leaks nothing about what it hides.
 * - In a JSON-RPC batch (2025-03-26 sessions only) the hidden calls are removed and the rest is
 *   forwarded, because JSON-RPC 2.0 §6 processes a batch's members independently: one bad
 *   call must not fail the others. Their errors are added to the backend's answer (to the
 *   JSON array, or as SSE events ahead of the backend's); when the rest were only
 *   notifications (backend 202), the errors become the JSON answer. A batch of nothing but
 *   hidden calls is answered without the backend.
 * - A `tools/list` answer is rewritten only when the backend has a tool policy and only the
 *   response whose id is that request's; every other message and SSE event passes unchanged,
 *   backend event ids included (they drive resumption).
 *
 * The policy judges the parsed message while the backend gets the client's bytes, so the two
 * must read the same tool name: a body such as `{"name":"denied","name":"allowed"}` would be
 * judged by its last `name` here and run by its first in a backend whose parser keeps the
 * first. parseMessages (wire/jsonrpc.ts, json-guard.ts) refuses any message with a duplicate
 * member name before it gets here (issue 13).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import type { BackendError } from '../backends/errors.js';
import type { BackendConfig } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import { ErrorCode, errorResponse, isBatchText, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { hasToolPolicy, isToolAllowed } from './tool-policy.js';
import { editAnswer, idKey, toolNameOf } from './answer-edit.js';

export type Screened = { body: string; refusal?: undefined } | { body?: undefined; refusal: JsonRpcMessage | JsonRpcMessage[] };

function toolName(m: JsonRpcMessage): string {
  const name = (m.params as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name : '';
}

/** The `tools/call` requests among `messages` that the backend's policy hides. */
function hiddenCalls(backend: BackendConfig, messages: readonly JsonRpcMessage[]): Array<JsonRpcMessage & { id: JsonRpcId }> {
  if (!hasToolPolicy(backend)) return [];
  return messages.filter((m): m is JsonRpcMessage & { id: JsonRpcId; method: string } => isRequest(m) && m.method === 'tools/call' && !isToolAllowed(backend, toolName(m)));
}

function unknownTool(m: JsonRpcMessage & { id: JsonRpcId }): JsonRpcMessage {
  return errorResponse(m.id, ErrorCode.InvalidParams, `Unknown tool: ${toolName(m)}`);
}

/**
 * Before the backend is called: `{ refusal }` is the whole answer (send it as JSON, HTTP 200);
 * otherwise `{ body }` is what to forward (the client's own bytes unless a batch lost calls).
 */
export function screenToolCalls(metrics: Metrics, log: FastifyBaseLogger | undefined, backend: BackendConfig, messages: readonly JsonRpcMessage[], body: string): Screened {
  const hidden = hiddenCalls(backend, messages);
  if (!hidden.length) return { body };
  for (const m of hidden) {
    metrics.policyDenials.inc({ backend: backend.name, reason: 'tool' });
    log?.info({ backend: backend.name, tool: toolName(m) }, 'tool call refused by tool policy');
  }
  const rest = messages.filter((m) => !hidden.includes(m as JsonRpcMessage & { id: JsonRpcId }));
  if (!rest.length || !isBatchText(body)) {
    return { refusal: isBatchText(body) ? hidden.map(unknownTool) : unknownTool(hidden[0]!) };
  }
  // One message left goes unbatched: equivalent by JSON-RPC, and later revisions' backends
  // take no batches at all. The answer is an array again once the errors are added.
  return { body: JSON.stringify(rest.length === 1 ? rest[0] : rest) };
}

/** Who hears of a list answer refused unread (issue 41 §1), and the body the backend was sent. */
export interface PolicyAnswerContext {
  /** The body forwarded (screenToolCalls); absent: the messages without the hidden calls, a batch when more than one. */
  forwarded?: string;
  log?: FastifyBaseLogger;
  metrics?: Metrics;
}

/**
 * After the backend answered: its response with the hidden calls' errors added and the
 * `tools/list` results filtered (answer-edit.ts). Returns `res` itself when there is nothing to
 * change. A list answer the gateway cannot read exactly is refused, not relayed unfiltered.
 */
export function applyToolPolicy(backend: BackendConfig, requestMessages: readonly JsonRpcMessage[], res: BackendResponse, context: PolicyAnswerContext = {}): BackendResponse {
  if (!hasToolPolicy(backend)) return res;
  const hidden = hiddenCalls(backend, requestMessages);
  const errors = hidden.map(unknownTool);
  const listIds = new Map(requestMessages.filter((m) => isRequest(m) && m.method === 'tools/list').map((m) => [idKey(m.id!), 'tools' as const]));
  const sent = requestMessages.filter((m) => !hidden.includes(m as JsonRpcMessage & { id: JsonRpcId }));
  const strict = {
    backend: backend.name,
    messages: sent,
    batch: context.forwarded === undefined ? sent.length > 1 : isBatchText(context.forwarded),
    refused: (error: BackendError) => {
      context.metrics?.backendErrors.inc({ backend: backend.name, reason: 'unreadable_answer' });
      context.log?.warn({ backend: backend.name, unreadable: error.rpcData.unreadable }, 'tools/list answer refused: the tool policy cannot filter it');
    },
  };
  return editAnswer(res, { errors, listIds, visible: (tool) => isToolAllowed(backend, toolNameOf(tool)), strict });
}
