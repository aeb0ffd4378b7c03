/**
 * The CLIENT spans (issue 30 §1): one per request or notification the gateway sends a backend,
 * put directly around the backend's Streamable HTTP client (reload/backend-set.ts), so it sees
 * the messages as they leave — after the 2026-era adapter, the policies and, on `/mcp`, the
 * member routing — and each span names the backend it reached (`switchboard.backend`).
 *
 * Context propagation (MCP semantic conventions, "Context propagation"; SEP-414): the span's
 * parent is the context the call carries (the SERVER span, backends/caller.ts traceHeaders),
 * and the span's own `traceparent`/`tracestate`/`baggage` go to the backend both in each
 * message's `params._meta`, unprefixed, and in the request's headers. Only with `telemetry`
 * on: this face is not put anywhere otherwise, and the body goes as it came.
 *
 * A span ends with its response (its `error.type` read by mcp-attributes.ts), with the HTTP
 * status when the backend refused the POST, with the failure when it could not be reached, and
 * — for an answer streamed that never carried the response — when the stream ends.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { syntheticBody, type BackendBody } from '../backends/body.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import { DECLARED_ANSWER_MAX_BYTES } from '../backends/held-answer.js';
import { headerValue } from '../wire/headers.js';
import { editAnswer, idKey, type ListKey } from '../policy/answer-edit.js';
import { isRequest, type JsonRpcMessage } from '../wire/jsonrpc.js';
import type { ClientScope, ClientTarget, Telemetry } from './telemetry.js';

const NO_LISTS: ReadonlyMap<string, ListKey> = new Map();

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
    const open = new Map<string, ClientScope>();
    const notifications: ClientScope[] = [];
    const sent = parsed.messages.map((m) => {
      if (typeof m.method !== 'string') return m;
      const scope = this.telemetry.client(this.#target, m, parent, session);
      if (isRequest(m)) open.set(idKey(m.id), scope);
      else notifications.push(scope);
      return withMeta(m, scope.headers);
    });
    const first = open.values().next().value ?? notifications[0];
    if (!first) return this.inner.post(body, headers, signal);
    const all = [...open.values(), ...notifications];
    let res: BackendResponse;
    try {
      res = await this.inner.post(JSON.stringify(parsed.batch ? sent : sent[0]), { ...headers, ...first.headers }, signal);
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
    return await this.#observed(res, open, headers);
  }

  /** The answer, each response ending its span (and telling the SERVER span its outcome). */
  #observed(res: BackendResponse, open: Map<string, ClientScope>, headers: BackendCallHeaders): BackendResponse | Promise<BackendResponse> {
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
    const endRest = () => {
      for (const s of open.values()) s.end();
      open.clear();
    };
    // The usual answer — JSON with its length — is read here, looked at, and passed on as the
    // same bytes with the same length (the route still sends it in one write: held-answer.ts).
    if (res.contentType === 'application/json' && Number(headerValue(res.headers['content-length'])) <= DECLARED_ANSWER_MAX_BYTES) return observedWhole(res, observe, endRest);
    const edited = editAnswer(res, { errors: [], listIds: NO_LISTS, visible: () => true, observe });
    return { ...edited, body: endingWith(edited.body, endRest) };
  }
}

async function observedWhole(res: BackendResponse, observe: (m: JsonRpcMessage) => void, endRest: () => void): Promise<BackendResponse> {
  try {
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    for (const m of Array.isArray(parsed) ? parsed : [parsed]) if (m && typeof m === 'object') observe(m as JsonRpcMessage);
    return { ...res, body: syntheticBody(text) };
  } finally {
    endRest();
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

/** The message with the span's context in `params._meta` (unprefixed keys, SEP-414), other `_meta` keys kept. */
function withMeta(m: JsonRpcMessage, trace: ClientScope['headers']): JsonRpcMessage {
  const params = (m.params && typeof m.params === 'object' ? m.params : {}) as Record<string, unknown>;
  const meta = params._meta && typeof params._meta === 'object' ? (params._meta as Record<string, unknown>) : {};
  const carried: Record<string, string> = {};
  for (const key of ['traceparent', 'tracestate', 'baggage'] as const) if (trace[key]) carried[key] = trace[key]!;
  // The gateway's span replaces the context the client put there: it is that span's parent now.
  const rest = Object.fromEntries(Object.entries(meta).filter(([k]) => k !== 'traceparent' && k !== 'tracestate' && k !== 'baggage'));
  return { ...m, params: { ...params, _meta: { ...rest, ...carried } } };
}

/** The body, calling `done` once it has been read to its end or dropped. */
function endingWith(body: BackendBody, done: () => void): BackendBody {
  return syntheticBody(
    (async function* () {
      try {
        yield* body;
      } finally {
        done();
      }
    })(),
  );
}

/** Puts the CLIENT span face around a backend client when telemetry is on; the client itself otherwise. */
export function withClientSpans(backend: McpBackend, telemetry: Telemetry | undefined): McpBackend {
  return telemetry ? new ClientSpanBackend(backend, telemetry) : backend;
}
