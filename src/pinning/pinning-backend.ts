/**
 * Tool-definition pinning (issue 31 §2) as a face of the backend itself, like the tool policy
 * (policy/tool-policy-backend.ts): put on a backend with `pinning.mode` other than `off` where
 * backends are built (reload/backend-set.ts), so every path that reaches it — `/mcp/{backend}`,
 * the members of `/mcp` and of virtual servers, 2026-07-28 clients, the bridges — sees the same
 * pinned lists and the same refusals.
 *
 * Before the backend is called, a `tools/call` of a tool whose definition changed is judged by
 * a map lookup (pin-book.ts): `block` refuses it, `hold` validates its arguments against the
 * pinned `inputSchema` (schema-check.ts: off the event loop, time-bounded, patterns on RE2);
 * both answer -32602 naming backend and tool and never reach the backend. After, `tools/list`
 * results are judged (judge.ts, list-answer.ts). A JSON-RPC batch (2025-03-26 sessions only)
 * is refused whole when one of its calls is: each of its requests is answered, none sent on.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import { messagesOf } from '../policy/tool-policy-backend.js';
import { ErrorCode, errorResponse, isBatchText, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { ListJudge, type JudgeReports, type PinMode } from './judge.js';
import { editListAnswer } from './list-answer.js';
import { NO_USER, type PinBook } from './pin-book.js';
import { schemaChecks } from './schema-check.js';

/** The schema a pinned tool without an object `inputSchema` is checked against. */
const ANY_OBJECT = { type: 'object' };

export class PinningBackend extends DecoratedBackend {
  readonly #judge: ListJudge;

  constructor(
    inner: McpBackend,
    /** The book of the calling user (an opaque user key): their own (`pinning.scope: user`) or the backend's. */
    private readonly bookOf: (user: string) => PinBook,
    private readonly mode: PinMode,
    reports: JudgeReports,
  ) {
    super(inner);
    this.#judge = new ListJudge(mode, reports);
  }

  async post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const messages = messagesOf(body);
    if (!messages) return this.inner.post(body, headers, signal);
    const calls = messages.filter((m): m is JsonRpcMessage & { id: JsonRpcId; method: string } => isRequest(m) && m.method === 'tools/call');
    const user = headers.caller?.principal.userKey ?? NO_USER;
    const book = this.bookOf(user);
    if (calls.length) {
      // Block and hold refuse on a pending change: read what the store has now, not only this replica's copy (PinBook.loadFresh).
      await (this.mode === 'log' ? book.load() : book.loadFresh());
      const judged = await Promise.all(calls.map((m) => this.#refusal(m, book, user)));
      const refusals = judged.filter((r) => r !== undefined);
      if (refusals.length) {
        headers.caller?.log.warn({ backend: this.name, tools: calls.map(toolName) }, 'tool call refused by tool-definition pinning');
        // A batch is answered whole: every request in it gets its response (JSON-RPC 2.0 §6), the
        // refused calls their refusal and the others "not run" — none of it reached the backend.
        const answer = isBatchText(body) ? messages.filter(isRequest).map((m) => (m.method === 'tools/call' ? judged[calls.indexOf(m)] : undefined) ?? notRun(m, this.name)) : refusals[0];
        return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(JSON.stringify(answer)), refused: true };
      }
    }
    const res = await this.inner.post(body, headers, signal);
    return editListAnswer(res, { backend: this.name, messages, batch: isBatchText(body), log: headers.caller?.log }, (tools) => this.#judge.judge(book, user, tools));
  }

  /** The error for a call the pins refuse; undefined when it may go to the backend. */
  async #refusal(m: JsonRpcMessage & { id: JsonRpcId }, book: PinBook, user: string): Promise<JsonRpcMessage | undefined> {
    const tool = toolName(m);
    if (!book.pending(tool)) return undefined;
    const pinned = book.pin(tool);
    // Hold checks a call against the pinned definition only where it may serve this user that definition (judge.ts).
    if (this.mode === 'block' || (this.mode === 'hold' && !(pinned && book.servable(pinned, user)))) {
      return errorResponse(m.id, ErrorCode.InvalidParams, `Tool "${tool}" of backend "${this.name}" is blocked: its definition changed since it was pinned, and waits for an operator's approval (switchboard pins approve --backend ${this.name} --tool ${tool})`);
    }
    if (this.mode !== 'hold') return undefined;
    const schema = pinned!.tool.inputSchema;
    const problem = await schemaChecks.check(schema && typeof schema === 'object' ? schema : ANY_OBJECT, (m.params as { arguments?: unknown } | undefined)?.arguments ?? {});
    return problem === undefined ? undefined : errorResponse(m.id, ErrorCode.InvalidParams, `Invalid arguments for tool "${tool}" of backend "${this.name}" (checked against its pinned inputSchema, held while a change waits for approval): ${problem}`);
  }
}

function toolName(m: JsonRpcMessage): string {
  const name = (m.params as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? name : '';
}

function notRun(m: JsonRpcMessage & { id: JsonRpcId }, backend: string): JsonRpcMessage {
  return errorResponse(m.id, ErrorCode.InvalidParams, `Not run: another call of this batch to backend "${backend}" was refused by tool-definition pinning`);
}
