/**
 * A 2026-07-28 backend, as the gateway's 2025-11-25 session layer sees every backend (issue 15,
 * "Bridging: 2025-11-25 client → 2026 backend"). A decorator of the backend's own client,
 * innermost, so that token exchange and the tool policy apply around it as to any backend.
 *
 * - `initialize` (sent by the session layer without a session): when the backend's era is
 *   2026-07-28 (backends/era.ts: pinned, known, or probed once the backend refused
 *   `initialize` as a 2026-only server does), it is answered from the backend's
 *   `server/discover` (initialize-from-discover.ts), and the gateway keeps the session the
 *   backend does not (adapted-sessions.ts). Otherwise it goes to the backend as it is.
 * - In such a session: `ping` and `logging/setLevel` are answered here (the level is kept and
 *   sent as `_meta` `io.modelcontextprotocol/logLevel`); notifications from the client have no
 *   2026 counterpart and are taken (202); the client's answers to the gateway's own requests go
 *   to the round that waits for them (input-answers.ts); every other request is sent with the
 *   session's `_meta` (revision, the client's capabilities and identity, log level) and the
 *   standard headers (Transports §Standard Request Headers), and answered through
 *   input-rounds.ts when the backend needs the client's input.
 * - `resources/subscribe` and `unsubscribe` are kept in the session; the GET stream is the
 *   backend's `subscriptions/listen` for the list changes it announced and those resources
 *   (session-listens.ts), or 405 when there is nothing to listen for. DELETE ends the session.
 *
 * Any other call — a backend of the 2025 era, or a 2026 client's own stateless request — passes
 * through untouched, after one prefix test.
 */
import type { BackendConfig } from '../../config/schema.js';
import { encodeHeaderValue } from '../../wire/header-encoding.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../../wire/jsonrpc.js';
import { HEADER } from '../../wire/protocol.js';
import { META, nameFieldOf, STATELESS_REVISION } from '../../wire/revision-2026.js';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backend.js';
import { parseObject, type BackendMessage } from '../backend-messages.js';
import { syntheticBody } from '../body.js';
import type { BackendEras } from '../era.js';
import { AdaptedSessions, type AdaptedSession } from './adapted-sessions.js';
import { InputAnswers } from './input-answers.js';
import { initializeFromDiscover } from './initialize-from-discover.js';
import { answerJson } from './json-answer.js';
import { converse } from './input-rounds.js';
import { SessionListens } from './session-listens.js';
import { ToolHeaders, type SessionCall } from './tool-headers.js';
import { untilAborted } from '../abortable.js';
import { mayCarryRequestError, requestErrorOf } from '../refused-request.js';

export interface ModernEraParts {
  eras: BackendEras;
  sessions: AdaptedSessions;
  answers: InputAnswers;
  listens: SessionListens;
}

export class ModernEraBackend implements McpBackend {
  /** The session's tools as the backend listed them, for the calls' `Mcp-Param-*` headers. */
  readonly #tools = new ToolHeaders();

  constructor(
    private readonly inner: McpBackend,
    private readonly parts: ModernEraParts,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  get config(): BackendConfig {
    return this.inner.config;
  }

  /** Not an async function: a 2025 backend's promise is handed back as it is, without one more around it (issue 29). */
  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    if (AdaptedSessions.isAdapted(headers.sessionId)) return this.#inSession(body, headers, headers.sessionId, signal);
    if (headers.sessionId === undefined && headers.protocolVersion === undefined && body.includes('"initialize"')) {
      const message = parseObject(body);
      if (message?.method === 'initialize' && message.id !== undefined) return this.#initializeEither(body, message, headers, signal);
    }
    return this.inner.post(body, headers, signal);
  }

  /**
   * `initialize` for a backend of either era, found the way basic/versioning §Backward
   * Compatibility tells a client (issue 42 cause 1): `server/discover` first, with the 2026
   * headers and `_meta` (era-probe.ts), unless the era is pinned or known (for everyone, or for
   * this user when the backend answered only to the user's token). A 2026-07-28 backend is
   * answered from its DiscoverResult and never gets the `initialize` it must refuse; a 2025
   * backend gets the user's `initialize` as it is. A backend that refuses a token-less probe
   * (401/403) is answered 401 here for a user without a token: its challenge, as the
   * `initialize` would have got it. Anything else that decides nothing (an outage) sends the
   * `initialize` as it is, whose answer then tells.
   */
  async #initializeEither(body: string, message: BackendMessage, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const eras = this.parts.eras;
    const userKey = headers.authorization === undefined ? undefined : headers.caller?.principal.userKey;
    // The probe may be shared with other callers; this one stops waiting when its own signal ends
    // (the fan-out timeout of /mcp counts the probe and the initialize together).
    const era = eras.knownEra(this.inner, userKey) ?? (await untilAborted(eras.eraOf(this.inner, headers.authorization, headers.caller), signal));
    if (era?.era === STATELESS_REVISION) return this.#initialize(message, headers, era.discover);
    if (!era?.era && (era?.refused || (headers.authorization === undefined && eras.challenges(this.inner)))) {
      return json(401, errorResponse(message.id as JsonRpcId, ErrorCode.InvalidRequest, `backend "${this.name}" wants authorization`));
    }
    return this.inner.post(body, headers, signal);
  }

  async get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    if (!AdaptedSessions.isAdapted(headers.sessionId)) return this.inner.get(headers, signal);
    const sessionId = headers.sessionId;
    const userKey = headers.caller?.principal.userKey;
    const session = await this.parts.sessions.get(sessionId, userKey);
    if (!session) return json(404, errorResponse(null, ErrorCode.InvalidRequest, 'session not found'));
    const stream = await this.parts.listens.open(session.userKey, sessionId, () => this.#listen(sessionId, headers, signal));
    return stream ?? json(405, errorResponse(null, ErrorCode.MethodNotFound, 'this backend offers no subscriptions'), { allow: 'POST, DELETE' });
  }

  async delete(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    if (!AdaptedSessions.isAdapted(headers.sessionId)) return this.inner.delete(headers, signal);
    const session = await this.parts.sessions.get(headers.sessionId, headers.caller?.principal.userKey);
    if (session) {
      await this.parts.sessions.end(headers.sessionId, session);
      await this.parts.listens.changed(session.userKey, headers.sessionId);
    }
    return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody('') };
  }

  /** The backend's `subscriptions/listen` for the session as it is now (its subscriptions may have changed since the stream opened). */
  async #listen(sessionId: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse | undefined> {
    if (signal?.aborted) return undefined;
    const session = await this.parts.sessions.get(sessionId, undefined);
    if (!session) return undefined;
    const notifications = listenFilter(session);
    if (!Object.keys(notifications).length) return undefined;
    const request = this.#modern({ jsonrpc: '2.0', id: `listen:${sessionId.slice(-8)}`, method: 'subscriptions/listen', params: { notifications } }, session, headers);
    const res = await this.inner.post(JSON.stringify(request.message), request.headers, signal).catch(() => undefined);
    // As SSE, or as JSON lines kept open (the conformance suite's reference server; issue 29).
    if (res?.status === 200 && (res.contentType === 'text/event-stream' || res.contentType === 'application/json')) return res;
    await res?.body.dump().catch(() => {});
    return undefined;
  }

  close(graceMs?: number): Promise<void> {
    return this.inner.close(graceMs);
  }

  async #initialize(message: BackendMessage, headers: BackendCallHeaders, known: Record<string, unknown> | undefined): Promise<BackendResponse> {
    const params = (message.params ?? {}) as Record<string, unknown>;
    const discover = known ?? (await this.#discover(headers, params));
    if (!discover) return json(502, errorResponse(message.id as JsonRpcId, ErrorCode.BackendUnavailable, `backend "${this.name}" did not answer server/discover`));
    const result = initializeFromDiscover(discover, params.protocolVersion, this.name);
    const clientInfo = params.clientInfo as Record<string, unknown> | undefined;
    const session: AdaptedSession = {
      userKey: headers.caller?.principal.userKey ?? '',
      protocolVersion: String(result.protocolVersion),
      capabilities: (discover.capabilities ?? {}) as Record<string, unknown>,
      ...(clientInfo ? { clientInfo } : {}),
    };
    const sessionId = await this.parts.sessions.open(session);
    return json(200, { jsonrpc: '2.0', id: message.id, result }, { [HEADER.sessionId]: sessionId });
  }

  /** The backend's DiscoverResult, asked for now (an era pinned in the config was never probed). */
  async #discover(headers: BackendCallHeaders, params: Record<string, unknown>): Promise<Record<string, unknown> | undefined> {
    const session: AdaptedSession = { userKey: '', protocolVersion: STATELESS_REVISION, capabilities: {}, ...(params.clientInfo ? { clientInfo: params.clientInfo as Record<string, unknown> } : {}) };
    const request = this.#modern({ jsonrpc: '2.0', id: 'discover', method: 'server/discover', params: {} }, session, headers);
    const res = await this.inner.post(JSON.stringify(request.message), request.headers);
    const answer = parseObject(await res.body.text().catch(() => ''));
    return answer?.result as Record<string, unknown> | undefined;
  }

  async #inSession(body: string, headers: BackendCallHeaders, sessionId: string, signal?: AbortSignal): Promise<BackendResponse> {
    const session = await this.parts.sessions.get(sessionId, headers.caller?.principal.userKey);
    if (!session) return json(404, errorResponse(null, ErrorCode.InvalidRequest, 'session not found'));
    const message = parseObject(body);
    if (!message) return json(400, errorResponse(null, ErrorCode.InvalidRequest, 'one JSON-RPC message per POST'));
    if (message.method === undefined) {
      if (InputAnswers.isOurs(message.id)) await this.parts.answers.deliver(message, { sessionId, userKey: session.userKey });
      return accepted();
    }
    if (message.id === undefined) return accepted();
    const id = message.id as JsonRpcId;
    if (message.method === 'ping') return json(200, { jsonrpc: '2.0', id, result: {} });
    if (message.method === 'logging/setLevel') {
      const level = (message.params as Record<string, unknown> | undefined)?.level;
      await this.parts.sessions.update(sessionId, { ...session, logLevel: typeof level === 'string' ? level : undefined });
      await this.parts.listens.changed(session.userKey, sessionId);
      return json(200, { jsonrpc: '2.0', id, result: {} });
    }
    if (message.method === 'resources/subscribe' || message.method === 'resources/unsubscribe') {
      const uri = (message.params as Record<string, unknown> | undefined)?.uri;
      if (typeof uri !== 'string') return json(200, errorResponse(id, ErrorCode.InvalidParams, 'params.uri must be a string'));
      const others = (session.subscriptions ?? []).filter((u) => u !== uri);
      await this.parts.sessions.update(sessionId, { ...session, subscriptions: message.method === 'resources/subscribe' ? [...others, uri] : others });
      // Answered once this replica's listens carry the new filter: an update triggered next is heard.
      await this.parts.listens.changed(session.userKey, sessionId);
      return json(200, { jsonrpc: '2.0', id, result: {} });
    }
    return this.#call({ ...message, id }, sessionId, session, headers, signal);
  }

  async #call(message: BackendMessage & { id: JsonRpcId }, sessionId: string, session: AdaptedSession, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const modern = this.#modern(message, session, headers);
    // A tools/call with its Mcp-Param-* headers, a tools/list without the tools a 2026 client would leave out (issue 42 §2, §3).
    const tools: SessionCall = { backend: this.name, sessionId, userKey: session.userKey, modern: (m) => this.#modern(m, session, headers), post: (b, h, s) => this.inner.post(b, h, s), log: headers.caller?.log, signal };
    const { res, headers: sent } = await this.#tools.send(tools, modern.message, modern.headers);
    const asked = { sessionId, userKey: session.userKey };
    const shape = message.method === 'tools/list' ? (m: BackendMessage) => this.#tools.listed(tools, m) : undefined;
    const conversation = { backend: this.inner, answers: this.parts.answers, asked, request: modern.message, headers: sent, signal, shape };
    if (res.status === 200 && res.contentType === 'text/event-stream') return converse(conversation, { res });
    if (mayCarryRequestError(res)) {
      // The backend's error about this request, in HTTP 400 as 2026-07-28 sends it: the 2025 session's response to it (issue 42 cause 9).
      const read = await requestErrorOf(res, message.id);
      return 'error' in read ? json(200, read.error) : read.res;
    }
    if (res.status !== 200 || res.contentType !== 'application/json') return res;
    return answerJson(res, conversation);
  }

  /** The message with the session's `_meta`, and the headers of a stateless request (no session id). */
  #modern(message: BackendMessage & { id: JsonRpcId }, session: AdaptedSession, headers: BackendCallHeaders): { message: BackendMessage & { id: JsonRpcId }; headers: BackendCallHeaders } {
    const params = (message.params ?? {}) as Record<string, unknown>;
    const meta: Record<string, unknown> = {
      ...(params._meta as Record<string, unknown> | undefined),
      [META.protocolVersion]: STATELESS_REVISION,
      [META.clientCapabilities]: headers.caller?.clientCapabilities ?? {},
    };
    if (session.clientInfo) meta[META.clientInfo] = session.clientInfo;
    if (session.logLevel) meta[META.logLevel] = session.logLevel;
    const method = String(message.method);
    const protocolHeaders: Record<string, string> = { 'mcp-method': method };
    const field = nameFieldOf(method);
    const name = field ? params[field] : undefined;
    if (typeof name === 'string') protocolHeaders['mcp-name'] = encodeHeaderValue(name);
    return {
      message: { ...message, params: { ...params, _meta: meta } },
      headers: { ...headers, sessionId: undefined, protocolVersion: STATELESS_REVISION, protocolHeaders },
    };
  }
}

/** What the session's GET stream listens for: the list changes the backend announced, the resources subscribed to. */
function listenFilter(session: AdaptedSession): Record<string, unknown> {
  const caps = session.capabilities as Record<string, { listChanged?: unknown; subscribe?: unknown } | undefined>;
  const filter: Record<string, unknown> = {};
  if (caps.tools?.listChanged) filter.toolsListChanged = true;
  if (caps.prompts?.listChanged) filter.promptsListChanged = true;
  if (caps.resources?.listChanged) filter.resourcesListChanged = true;
  if (caps.resources?.subscribe && session.subscriptions?.length) filter.resourceSubscriptions = session.subscriptions;
  return filter;
}

function json(status: number, message: unknown, headers: Record<string, string> = {}): BackendResponse {
  return { status, headers, contentType: 'application/json', body: syntheticBody(JSON.stringify(message)) };
}

function accepted(): BackendResponse {
  return { status: 202, headers: {}, contentType: '', body: syntheticBody('') };
}
