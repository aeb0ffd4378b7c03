/**
 * The CLIENT spans (issue 30 §1): one per request or notification the gateway sends a backend,
 * put directly around the backend's Streamable HTTP client (reload/backend-set.ts), so it sees
 * the messages as they leave — after the 2026-era adapter, the policies and, on `/mcp`, the
 * member routing — and each span names the backend it reached (`switchboard.backend`).
 *
 * Context propagation (MCP semantic conventions, "Context propagation"; SEP-414): the span's
 * parent is the context the call carries (the SERVER span, backends/caller.ts traceHeaders),
 * and the span's own `traceparent`/`tracestate`/`baggage` go to the backend both in each
 * message's `params._meta`, unprefixed (spliced into the text: meta-splice.ts), and in the
 * request's headers. Only with `telemetry` on: this face is not put anywhere otherwise, and the
 * body goes as it came.
 *
 * A span ends with its response (scanned, not parsed, by policy/answer-observe.ts; its
 * `error.type` read by mcp-attributes.ts), with the HTTP
 * status when the backend refused the POST, with the failure when it could not be reached, and
 * — for an answer streamed that never carried the response — when the stream ends.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import { idKey } from '../policy/answer-edit.js';
import { observedAnswer } from '../policy/answer-observe.js';
import { isRequest, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { withMeta, withTraceMetaText } from './meta-splice.js';
import type { ClientScope, ClientTarget, Telemetry } from './telemetry.js';

export class ClientSpanBackend extends DecoratedBackend {
  readonly #target: ClientTarget;

  constructor(
    inner: McpBackend,
    private readonly telemetry: Telemetry,
  ) {
    super(inner);
    this.#target = { name: inner.name, url: inner.config.url };
  }

  async post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const parsed = parseBody(body);
    if (!parsed) return this.inner.post(body, headers, signal);
    const parent = { traceparent: headers.traceparent, tracestate: headers.tracestate, baggage: headers.baggage };
    const session = { id: headers.sessionId, protocolVersion: headers.protocolVersion };
    // Not sampled and no client context: no CLIENT span, nothing injected (the body goes as it came).
    const unsampledRoot = headers.caller?.trace?.unsampledRoot === true;
    const open = new Map<string, ClientScope>();
    const notifications: ClientScope[] = [];
    const scopes = parsed.messages.map((m) => {
      if (typeof m.method !== 'string') return undefined;
      const scope = this.telemetry.client(this.#target, m, parent, session, unsampledRoot);
      if (isRequest(m)) open.set(idKey(m.id), scope);
      else notifications.push(scope);
      return scope;
    });
    const first = open.values().next().value ?? notifications[0];
    if (!first) return this.inner.post(body, headers, signal);
    const all = [...open.values(), ...notifications];
    // One message (all but a 2025-03-26 batch): its text with the context spliced in, not re-written.
    const sent = unsampledRoot ? body : parsed.batch ? JSON.stringify(parsed.messages.map((m, i) => (scopes[i] ? withMeta(m, scopes[i].headers) : m))) : withTraceMetaText(body, parsed.messages[0]!, first.headers);
    let res: BackendResponse;
    try {
      res = await this.inner.post(sent, unsampledRoot ? headers : { ...headers, ...first.headers }, signal);
    } catch (err) {
      const failure = (err as { failure?: unknown }).failure;
      for (const s of all) s.end(typeof failure === 'string' ? failure : '_OTHER');
      throw err;
    }
    if (res.status < 200 || res.status >= 300) {
      for (const s of all) s.end(String(res.status));
      return res;
    }
    for (const s of notifications) s.end();
    if (!open.size) return res;
    return this.#observed(res, open, headers);
  }

  /** The answer, each response ending its span (and telling the SERVER span its outcome). */
  #observed(res: BackendResponse, open: Map<string, ClientScope>, headers: BackendCallHeaders): BackendResponse {
    const server = headers.caller?.trace;
    const observe = (m: JsonRpcMessage) => {
      if (m.method !== undefined || (typeof m.id !== 'string' && typeof m.id !== 'number')) return;
      const scope = open.get(idKey(m.id));
      if (!scope) return;
      open.delete(idKey(m.id));
      scope.observe(m);
      scope.end();
      server?.observe(m);
    };
    const settled = () => {
      for (const s of open.values()) s.end();
      open.clear();
    };
    // Passed on as the same bytes (a JSON answer with its length, in one write: held-answer.ts),
    // each message scanned for its outcome — parsed whole only when the tool's result is recorded.
    return observedAnswer(res, { observe, settled, whole: this.telemetry.recordsContent });
  }
}

/** The messages of a body, or undefined when it is not JSON-RPC objects (then it goes untouched). */
function parseBody(body: string): { messages: JsonRpcMessage[]; batch: boolean } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  if (!list.length || !list.every((m) => m !== null && typeof m === 'object' && !Array.isArray(m))) return undefined;
  return { messages: list as JsonRpcMessage[], batch: Array.isArray(parsed) };
}

/** Puts the CLIENT span face around a backend client when telemetry is on; the client itself otherwise. */
export function withClientSpans(backend: McpBackend, telemetry: Telemetry | undefined): McpBackend {
  return telemetry ? new ClientSpanBackend(backend, telemetry) : backend;
}
