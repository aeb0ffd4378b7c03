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
import type { BackendCaller, BackendCallHeaders, BackendResponse, CallTrace, McpBackend, TraceHeaders } from '../backends/backend.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import { observedAnswer, type AnswerObserver } from '../policy/answer-observe.js';
import { ByRequestId } from '../policy/by-request-id.js';
import { isBatchText, isRequest, type JsonRpcMessage } from '../wire/jsonrpc.js';
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
    const parsed = routeParsed(headers.caller, body) ?? parseBody(body);
    if (!parsed) return this.inner.post(body, headers, signal);
    const parent = { traceparent: headers.traceparent, tracestate: headers.tracestate, baggage: headers.baggage };
    const session = { id: headers.sessionId, protocolVersion: headers.protocolVersion };
    // Not sampled and no client context: no CLIENT span, nothing injected (the body goes as it came).
    const unsampledRoot = headers.caller?.trace?.unsampledRoot === true;
    const call = new ClientCall(headers.caller?.trace, this.telemetry.recordsContent);
    const scopes: Array<ClientScope | undefined> = [];
    for (const m of parsed.messages) scopes.push(typeof m.method === 'string' ? call.add(m, this.telemetry.client(this.#target, m, parent, session, headers.caller?.trace)) : undefined);
    const first = call.first();
    if (!first) return this.inner.post(body, headers, signal);
    // One message (all but a 2025-03-26 batch): its text with the context spliced in, not re-written.
    const sent = unsampledRoot ? body : parsed.batch ? JSON.stringify(parsed.messages.map((m, i) => (scopes[i] ? withMeta(m, scopes[i].headers) : m))) : withTraceMetaText(body, parsed.messages[0]!, first.headers, parsed.paramsName);
    let res: BackendResponse;
    try {
      res = await this.inner.post(sent, unsampledRoot ? headers : withTraceHeaders(headers, first.headers), signal);
    } catch (err) {
      const failure = (err as { failure?: unknown }).failure;
      call.endAll(typeof failure === 'string' ? failure : '_OTHER');
      throw err;
    }
    if (res.status < 200 || res.status >= 300) {
      call.endAll(String(res.status));
      return res;
    }
    call.endNotifications();
    // Passed on as the same bytes (a JSON answer with its length, in one write: held-answer.ts),
    // each message scanned for its outcome — parsed whole only when the tool's result is recorded.
    return call.holding ? observedAnswer(res, call) : res;
  }
}

/**
 * The CLIENT spans of one POST: the requests' spans by id (policy/by-request-id.ts), waiting for
 * their responses, and the notifications'. It is the answer's observer itself (answer-observe.ts),
 * so nothing is made per call beyond it (issue 44 part 1: closures made per call showed in the
 * profile).
 */
class ClientCall extends ByRequestId<ClientScope> implements AnswerObserver {
  #notifications: ClientScope[] | undefined;

  constructor(
    /** The SERVER span of the client request, told each response's outcome. */
    private readonly server: CallTrace | undefined,
    /** `recordContent`: the tool's result goes on the span, so messages are parsed whole. */
    readonly whole: boolean,
  ) {
    super();
  }

  /**
   * A response without an error ends its span as {@link settled} does: the span's and the SERVER
   * span's `observe` keep nothing of it unless the result is recorded (otel-sdk.ts SpanLife).
   */
  get errorsOnly(): boolean {
    return !this.whole;
  }

  add(m: JsonRpcMessage, scope: ClientScope): ClientScope {
    if (!isRequest(m)) (this.#notifications ??= []).push(scope);
    else this.hold(m.id, scope);
    return scope;
  }

  /** The span whose context the request carries: the first request's, else the first notification's. */
  first(): ClientScope | undefined {
    return this.firstHeld ?? this.#notifications?.[0];
  }

  endAll(failure: string): void {
    this.forEachHeld(endWith, failure);
    if (this.#notifications) for (const s of this.#notifications) s.end(failure);
  }

  /** A notification's span ends with the backend's acceptance of the POST. */
  endNotifications(): void {
    if (this.#notifications) for (const s of this.#notifications) s.end();
  }

  /** Each response ends its span (and tells the SERVER span its outcome). */
  observe(m: JsonRpcMessage): void {
    if (m.method !== undefined || (typeof m.id !== 'string' && typeof m.id !== 'number')) return;
    const scope = this.take(m.id);
    if (!scope) return;
    scope.observe(m);
    scope.end();
    this.server?.observe(m);
  }

  /** The answer is over: spans still open end without a response. */
  settled(): void {
    this.forEachHeld(endWith, undefined);
    this.clear();
  }
}

/** Ends a span, with the failure when there is one. */
const endWith = (scope: ClientScope, failure: string | undefined) => scope.end(failure);

/**
 * The messages the route parsed, when `body` is the very text it parsed (BackendCaller.parsed,
 * which the policy faces read too), so it is not parsed a second time; undefined when a face
 * rewrote the body, or the call has no route's parse (a GET stream's).
 */
function routeParsed(caller: BackendCaller | undefined, body: string): ParsedBody | undefined {
  const parsed = caller?.parsed;
  return parsed?.text === body ? { messages: parsed.messages, batch: isBatchText(body), paramsName: parsed.paramsName } : undefined;
}

/** A body's messages; `paramsName` as the route's scan found it (BackendCaller.parsed), when the body is the route's. */
type ParsedBody = { messages: readonly JsonRpcMessage[]; batch: boolean; paramsName?: number };

/** The messages of a body, or undefined when it is not JSON-RPC objects (then it goes untouched). */
function parseBody(body: string): ParsedBody | undefined {
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

/**
 * The call's headers with the CLIENT span's context in place of the client's: its three members
 * set by name (a spread of the context object was a generic copy, issue 44 part 1). A scope with
 * no context (no `traceparent`) leaves the headers as they are.
 */
function withTraceHeaders(headers: BackendCallHeaders, trace: TraceHeaders): BackendCallHeaders {
  if (trace.traceparent === undefined) return headers;
  return { ...headers, traceparent: trace.traceparent, tracestate: trace.tracestate, baggage: trace.baggage };
}

/** Puts the CLIENT span face around a backend client when telemetry is on; the client itself otherwise. */
export function withClientSpans(backend: McpBackend, telemetry: Telemetry | undefined): McpBackend {
  return telemetry ? new ClientSpanBackend(backend, telemetry) : backend;
}
