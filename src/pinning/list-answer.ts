/**
 * A backend's answer with its `tools/list` results replaced by what the pins serve
 * (judge.ts). Judging reads the shared store, so the answer is read whole before it is
 * rewritten, and read strictly (backends/strict-answer.ts, issue 41 §1): the list the pins judge
 * must be the one the client takes. An answer the gateway cannot read that way — not JSON, a
 * byte-order mark, a response under an id the client did not send (`"1"` for `1`), two
 * responses to one request, a batch for a single request, an SSE stream with two candidates —
 * is refused: each request of the POST gets -32010 under its own id, and nothing of the
 * backend's answer reaches the client. The lists a lenient client would have taken from it are
 * judged all the same (served to no one), so a change they carry is pending and its calls are
 * held or blocked. Otherwise its messages and SSE events, backend event ids
 * included, pass in order, only the list responses rewritten. Answers to POSTs without a
 * `tools/list` are not touched and not held.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import { editStrictly, idKey } from '../backends/strict-answer.js';
import { isRequest, requestIdsOf, type JsonRpcMessage } from '../wire/jsonrpc.js';

/** Judges a page of tools (the backend's `result.tools`); resolves to the tools to serve. */
export type JudgeTools = (tools: unknown[]) => Promise<unknown[]>;

/** The POST whose answer is judged. */
export interface ListRequest {
  backend: string;
  /** The client's messages, as parsed. */
  messages: readonly JsonRpcMessage[];
  /** Whether they came as a batch. */
  batch: boolean;
  log?: FastifyBaseLogger;
}

/** `res` with its tools/list results judged; `res` itself when the POST lists no tools. */
export function editListAnswer(res: BackendResponse, request: ListRequest, judge: JudgeTools): BackendResponse {
  const judged = request.messages.filter((m) => isRequest(m) && m.method === 'tools/list').map((m) => m.id!);
  if (!judged.length) return res;
  return editStrictly(res, {
    backend: request.backend,
    judged,
    sent: requestIdsOf(request.messages),
    batch: request.batch,
    edit: async ({ responses }) => {
      const served = new Map<string, unknown[]>();
      for (const [key, msg] of responses) {
        const tools = (msg.result as { tools?: unknown } | undefined)?.tools;
        if (Array.isArray(tools)) served.set(key, await judge(tools));
      }
      return (m) => {
        const tools = m.method === undefined && (typeof m.id === 'string' || typeof m.id === 'number') ? served.get(idKey(m.id)) : undefined;
        return tools ? { ...m, result: { ...(m.result as object), tools } } : m;
      };
    },
    refused: (error) => request.log?.warn({ backend: request.backend, unreadable: error.rpcData.unreadable }, 'tools/list answer refused: pinning cannot judge it'),
    inspect: (candidates) => judgeCandidates(candidates, judge).catch((err: Error) => request.log?.warn({ backend: request.backend, err: err.message }, 'a refused tools/list answer could not be judged')),
  });
}

/**
 * What a lenient client would have taken from a refused answer is judged all the same, served
 * to no one: a change in it is recorded as pending, so the tool's calls are blocked or held
 * though its list was refused. Tool by tool, each definition the candidates hold once; and since
 * judging a pinned definition withdraws a pending change, the definitions judged as changes are
 * judged again last — a decoy candidate holding the pinned definitions (two SSE candidates)
 * cannot withdraw the change the other one carries.
 */
async function judgeCandidates(candidates: readonly JsonRpcMessage[], judge: JudgeTools): Promise<void> {
  const definitions = new Map<string, unknown>();
  for (const candidate of candidates) {
    const tools = (candidate.result as { tools?: unknown } | undefined)?.tools;
    if (Array.isArray(tools)) for (const tool of tools) definitions.set(JSON.stringify(tool), tool);
  }
  const changes: unknown[] = [];
  for (const tool of definitions.values()) {
    const served = await judge([tool]);
    if (served.length !== 1 || served[0] !== tool) changes.push(tool);
  }
  for (const tool of changes) await judge([tool]);
}
