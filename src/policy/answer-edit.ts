/**
 * Edits a backend's answer to one POST, for the tool lists (tool-traffic.ts) and the CEL rules
 * (rule-policy-backend.ts) alike: list results (`tools/list`, and for the rules `prompts/list`,
 * `resources/list`, `resources/templates/list`) lose the entries a policy hides, the
 * errors for requests the gateway refused are added, and an observer (the audit trail) sees
 * every response message as it passes. Only the responses whose ids are the listed requests'
 * change; every other message and SSE event passes unchanged, backend event ids included
 * (they drive resumption).
 *
 * - 202 (the rest of a batch was notifications): the errors become the JSON answer.
 * - a list to filter: the answer is read whole and strictly (backends/strict-answer.ts, issue
 *   41 §1), so the list filtered is the one the client takes; an answer the gateway cannot read
 *   so (not JSON, a byte-order mark, a response under an id not sent exactly, two responses to
 *   one request, a batch for one request, two candidates on a stream) is refused: -32010 for
 *   each request, `strict.refused` told (a log line, a metric), nothing of it relayed.
 * - only an observer: the answer passes as sent, watched by answer-observe.ts (scanned, not parsed).
 * - application/json, only errors to add: parsed once, rewritten, written again (not JSON: passed as sent).
 * - text/event-stream, only errors to add: errors first as events, then the backend's events.
 */
import type { BackendResponse } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import type { BackendError } from '../backends/errors.js';
import { editStrictly, idKey } from '../backends/strict-answer.js';
import { requestIdsOf, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { formatSseEvent, transformSse } from '../wire/sse.js';
import { observedAnswer, type AnswerObserver } from './answer-observe.js';

/** The key of a list result's entries: `tools`, `prompts`, `resources`, `resourceTemplates`. */
export type ListKey = 'tools' | 'prompts' | 'resources' | 'resourceTemplates';

/** The list each listing method answers with. */
export const LIST_KEYS: Readonly<Record<string, ListKey>> = { 'tools/list': 'tools', 'prompts/list': 'prompts', 'resources/list': 'resources', 'resources/templates/list': 'resourceTemplates' };

export interface AnswerEdit {
  /** `idKey`s of the list requests whose results are filtered, with the list each answers. */
  listIds: ReadonlyMap<string, ListKey>;
  /** Whether an entry stays in a filtered list. */
  visible(entry: unknown, key: ListKey): boolean;
  /** Answers the gateway made for requests it kept from the backend. */
  errors: readonly JsonRpcMessage[];
  /** Sees each response message of the backend (not the added errors). */
  observe?: AnswerObserver;
  /** What a list answer is read against (needed with `listIds`): the POST as forwarded, and who is told of a refusal. */
  strict?: StrictListRead;
}

export interface StrictListRead {
  backend: string;
  /** The messages sent to the backend (without those the gateway answered itself). */
  messages: readonly JsonRpcMessage[];
  /** Whether they were sent as a batch. */
  batch: boolean;
  refused(error: BackendError): void;
}

/** A request id as a map key: `1` and `"1"` are different requests. */
export { idKey } from '../backends/strict-answer.js';

/** `res` with the edit applied; `res` itself when there is nothing to do. */
export function editAnswer(res: BackendResponse, edit: AnswerEdit): BackendResponse {
  if (res.status < 200 || res.status >= 300) return res;
  const { errors, listIds, observe } = edit;
  if (!errors.length && !listIds.size && !observe) return res;
  // Only watched (each allowed call the audit records): the answer as it is, its headers not
  // copied and no rewrite made for it (issue 44 part 1; what the branches below do for it).
  if (observe && !errors.length && !listIds.size && res.status !== 202) return observedAnswer(res, observe);
  const headers = { ...res.headers };
  delete headers['content-length'];
  const rewrite = (m: unknown): unknown => {
    if (!m || typeof m !== 'object' || Array.isArray(m)) return m;
    const msg = m as JsonRpcMessage;
    observe?.observe(msg);
    const key = msg.method === undefined && 'result' in msg && (typeof msg.id === 'string' || typeof msg.id === 'number') ? listIds.get(idKey(msg.id)) : undefined;
    if (!key) return m;
    return { ...msg, result: filterEntries(msg.result, key, (entry) => edit.visible(entry, key)) };
  };
  if (res.status === 202) {
    if (!errors.length) return res;
    void res.body.dump().catch(() => {});
    return { status: 200, headers, contentType: 'application/json', body: syntheticBody(JSON.stringify(errors)) };
  }
  if (listIds.size) return editLists(res, edit, rewrite);
  if (res.contentType === 'application/json') return { ...res, headers, body: syntheticBody(editJson(res, rewrite, errors)) };
  if (res.contentType === 'text/event-stream') {
    const events = transformSse(res.body, (data, id) => {
      if (!observe || !data.trim()) return { data, id };
      let parsed: unknown;
      try {
        parsed = JSON.parse(data);
      } catch {
        return { data, id };
      }
      const rewritten = Array.isArray(parsed) ? parsed.map(rewrite) : rewrite(parsed);
      const changed = Array.isArray(parsed) ? (rewritten as unknown[]).some((m, i) => m !== parsed[i]) : rewritten !== parsed;
      return { data: changed ? JSON.stringify(rewritten) : data, id };
    });
    return {
      ...res,
      headers,
      body: syntheticBody(
        (async function* () {
          for (const e of errors) yield Buffer.from(formatSseEvent(JSON.stringify(e)));
          yield* events;
        })(),
      ),
    };
  }
  return res;
}

/** The answer to a POST with a list to filter, read strictly (see the module comment). */
function editLists(res: BackendResponse, edit: AnswerEdit, rewrite: (m: unknown) => unknown): BackendResponse {
  const { strict, listIds } = edit;
  if (!strict) throw new Error('editAnswer: a list edit needs the forwarded request (strict)');
  const judged = strict.messages.filter((m) => (typeof m.id === 'string' || typeof m.id === 'number') && m.method !== undefined && listIds.has(idKey(m.id))).map((m) => m.id as JsonRpcId);
  return editStrictly(res, {
    backend: strict.backend,
    judged,
    sent: requestIdsOf(strict.messages),
    batch: strict.batch,
    added: edit.errors,
    edit: () => rewrite as (m: JsonRpcMessage) => JsonRpcMessage,
    refused: strict.refused,
  });
}

async function* editJson(res: BackendResponse, rewrite: (m: unknown) => unknown, errors: readonly JsonRpcMessage[]): AsyncGenerator<string> {
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    yield text; // not ours to judge: the client gets what the backend sent
    return;
  }
  const answer = Array.isArray(parsed) ? [...parsed.map(rewrite), ...errors] : errors.length ? [rewrite(parsed), ...errors] : rewrite(parsed);
  yield answer === parsed ? text : JSON.stringify(answer);
}

/**
 * A list result without the entries under `key` that `visible` refuses. Everything else in the
 * result (`nextCursor`, `_meta`, unknown fields) is kept; a page may come out shorter or empty,
 * which pagination allows. The input is not modified; it is returned as is when nothing goes.
 */
export function filterEntries(result: unknown, key: ListKey, visible: (entry: unknown) => boolean): unknown {
  if (!result || typeof result !== 'object' || Array.isArray(result)) return result;
  const entries = (result as Record<string, unknown>)[key];
  if (!Array.isArray(entries)) return result;
  const kept = entries.filter(visible);
  return kept.length === entries.length ? result : { ...result, [key]: kept };
}

/** A tools/list result without the tools `visible` refuses (filterEntries). */
export function filterTools(result: unknown, visible: (tool: unknown) => boolean): unknown {
  return filterEntries(result, 'tools', visible);
}

/** A listed tool's name ("" when it has none, which a policy then judges). */
export function toolNameOf(tool: unknown): string {
  return fieldOf(tool, 'name');
}

/** A list entry's string field — a prompt's `name`, a resource's `uri` — or "". */
export function fieldOf(entry: unknown, field: string): string {
  const value = entry && typeof entry === 'object' ? (entry as Record<string, unknown>)[field] : undefined;
  return typeof value === 'string' ? value : '';
}
