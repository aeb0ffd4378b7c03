/**
 * The aggregated endpoint `/mcp` (SPEC §2): every backend this user may use, behind one MCP
 * session, with tools, prompts and resource templates namespaced `{backend}__{name}` and
 * resource URIs `{backend}+{uri}` (names.ts). It presents itself to the MCP layer as one
 * more backend speaking Streamable HTTP, so sessions, SSE relays, replay, resumption,
 * replicas and WebSocket work for it exactly as for `/mcp/{backend}`. Its "backend session
 * id" is the session map (session-map.ts): each member backend's own session id and
 * revision, kept in the user's session record, so any replica can route any message.
 *
 * Routing, by message:
 * - `initialize`: all allowed backends in parallel (initialize.ts); `ping`: answered here;
 * - list methods: walked across backends with a composite cursor (lists.ts);
 * - `tools/call`, `prompts/get`, `completion/complete` (ref/prompt): by the name's prefix;
 *   `resources/read|subscribe|unsubscribe`, `completion/complete` (ref/resource): by the URI's;
 * - `logging/setLevel`: to every member that offers logging;
 * - notifications (`initialized`, `cancelled`, `roots/list_changed`, …): to every member
 *   (a cancellation names a request id that only the backend that got it knows);
 * - responses to server→client requests: to the backend named in the qualified id.
 */
import { insufficientScopeError } from '../connect/upstream-auth.js';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import type { BackendConfig } from '../config/schema.js';
import { elicitationRequiredMessages, supportsUrlElicitation } from '../connect/elicitation-replies.js';
import type { Elicitation } from '../connect/elicitations.js';
import type { LinkingContext } from '../linking/linking.js';
import { ErrorCode, isRequest, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { collectMessages } from '../backends/backend-body.js';
import { transformSse } from '../wire/sse.js';
import { initializeAggregate } from './initialize.js';
import { LIST_METHODS, listPage } from './lists.js';
import { type AggregateCall, Members } from './members.js';
import { mergeStreams } from './merged-stream.js';
import { routeOf, type Request, type Route } from './request-routes.js';
import { backendFailureReply, emptyResponse, errorReply, jsonResponse, sseResponse } from './responses.js';
import { jsonAnswer, type MemberAnswer, refusedAnswer, sseAnswer } from './member-answer.js';
import { mayCarryRequestError } from '../backends/refused-request.js';
import { messageToClient, responseToBackend } from './rewrite.js';
import { Rejoiner } from './rejoin.js';
import { MemberLinker } from './member-link.js';
import { decodeAggregateState, encodeAggregateState, type MemberSession } from './session-map.js';

/** An opened member GET stream: its rewritten events, and how to let go of it unread. */
interface MemberStream {
  source: AsyncIterable<Buffer>;
  close(): void;
}

/** The session record's backend name for aggregated sessions; outside [a-z0-9-]+, so no backend can have it. */
export const AGGREGATE_NAME = '*';

/** The configs of aggregated endpoints (`/mcp` and every virtual server): their answers depend on who asks. */
const AGGREGATED_CONFIGS = new WeakSet<BackendConfig>();

/** True for the config of an aggregated endpoint (`/mcp` or a virtual server), whose lists are per user. */
export function isAggregatedEndpoint(config: BackendConfig): boolean {
  return AGGREGATED_CONFIGS.has(config);
}

/**
 * Which endpoint an aggregated backend serves: `/mcp` (every backend, session records named
 * `*`), or a virtual server (its name, and only the backends its entries name).
 */
export interface AggregateEndpoint {
  name: string;
  members?: ReadonlySet<string>;
  /** Whether a member's notification (names already qualified) reaches the client; all do on `/mcp`. */
  keeps?: (backend: string, notification: JsonRpcMessage) => boolean;
}

export class AggregatedBackend implements McpBackend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #members: Members;
  readonly #rejoiner: Rejoiner;
  readonly #linker: MemberLinker;
  readonly #keeps: AggregateEndpoint['keeps'];

  constructor(ctx: LinkingContext, endpoint: AggregateEndpoint = { name: AGGREGATE_NAME }) {
    this.name = endpoint.name;
    this.#keeps = endpoint.keeps;
    this.#members = new Members(ctx, endpoint.members);
    this.#rejoiner = new Rejoiner(ctx, this.#members, endpoint.name);
    this.#linker = new MemberLinker(ctx, this.#members, endpoint.name);
    this.config = {
      name: endpoint.name,
      transport: 'streamable-http',
      args: [],
      env: {},
      headers: {},
      // Served in the 2025-11-25 way; stateless clients of `/mcp` reach it through the gateway's own session (src/stateless/).
      protocol: '2025-11-25',
      timeout: Math.max(...[...ctx.backends.values()].map((b) => b.config.timeout), 0),
      access: { scopes: [], tenants: [], claims: {}, tools: { allow: [], deny: [] } },
      pinning: { mode: 'off', scope: 'user' }, // its members are pinned, each by its own config (src/pinning/)
    } as BackendConfig;
    AGGREGATED_CONFIGS.add(this.config);
  }

  async post(body: string, headers: BackendCallHeaders): Promise<BackendResponse> {
    const call = this.#call(headers);
    const parsed = JSON.parse(body) as JsonRpcMessage | JsonRpcMessage[];
    if (!Array.isArray(parsed)) {
      if (parsed.method === 'initialize' && isRequest(parsed)) return initializeAggregate(this.#members, call, parsed);
      this.#rejoiner.schedule(call, headers.protocolVersion);
      return this.#dispatch(call, parsed);
    }
    // JSON-RPC batches (2025-03-26 sessions only): each message on its own, answers gathered.
    const answers: JsonRpcMessage[] = [];
    for (const message of parsed) {
      const res = await this.#dispatch(call, message);
      if (res.status === 202) {
        await res.body.dump();
        continue;
      }
      const { messages } = await collectMessages(res);
      answers.push(...messages.filter((m) => m.method === undefined));
    }
    return answers.length ? jsonResponse(answers) : emptyResponse(202);
  }

  /** The merged standalone stream; with `lastEventId`, the one member stream it names (SSE polling of a POST answer). */
  async get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const call = this.#call(headers);
    if (headers.lastEventId) return this.#resumeMemberStream(call, headers.lastEventId, signal);
    const members = this.#members.members(call);
    const stops = followedBy(signal, members.length);
    const opened = await Promise.all(members.map((m, i) => this.#openMemberStream(call, m.name, m.backend, m.session, stops[i]!)));
    const lost = members.find((_, i) => opened[i] === 'lost');
    if (lost) {
      for (const o of opened) if (typeof o === 'object') o.close();
      return this.#memberLost(call, lost.name);
    }
    const sources = opened.flatMap((o) => (typeof o === 'object' ? [o.source] : []));
    // No member has a stream: the gateway keeps its own open for its notifications.
    if (!sources.length) return emptyResponse(405);
    return sseResponse(mergeStreams(sources));
  }

  async delete(headers: BackendCallHeaders): Promise<BackendResponse> {
    const call = this.#call(headers);
    await Promise.allSettled(
      this.#members.members(call).map(async ({ backend, session }) => {
        if (!session.sessionId) return;
        const authorization = await this.#members.tokenIfAny(call.caller, backend);
        const res = await backend.delete({ sessionId: session.sessionId, protocolVersion: session.protocolVersion, authorization });
        await res.body.dump();
      }),
    );
    return emptyResponse(204);
  }

  async close(): Promise<void> {}

  #call(headers: BackendCallHeaders): AggregateCall {
    if (!headers.caller) throw new Error('the aggregated backend needs the caller');
    const state = decodeAggregateState(headers.sessionId);
    return { caller: headers.caller, map: state.members, state, traceparent: headers.traceparent, tracestate: headers.tracestate, baggage: headers.baggage };
  }

  async #dispatch(call: AggregateCall, message: JsonRpcMessage): Promise<BackendResponse> {
    if (message.method === undefined) return this.#answerToBackend(call, message);
    if (!isRequest(message)) return this.#broadcast(call, message);
    if (message.method === 'ping') return jsonResponse({ jsonrpc: '2.0', id: message.id, result: {} });
    if (LIST_METHODS[message.method]) return listPage(this.#members, this.#linker, call, message);
    if (message.method === 'logging/setLevel') return this.#setLevel(call, message);
    const route = routeOf(message);
    if (!route) {
      if (route === null) return errorReply(message.id, ErrorCode.MethodNotFound, `Method not found: ${message.method}`);
      return errorReply(message.id, ErrorCode.InvalidParams, `Invalid params: ${message.method} needs a name or URI qualified with its backend`);
    }
    return this.#forward(call, message, route);
  }

  async #forward(call: AggregateCall, request: Request, route: Route): Promise<BackendResponse> {
    const member = this.#members.member(call, route.backend);
    if (!member || (route.visible && !route.visible(member.backend.config))) {
      return errorReply(request.id, ErrorCode.InvalidParams, `Unknown ${route.label}`);
    }
    const { backend } = member;
    let { session } = member;
    let res: BackendResponse;
    try {
      const authorization = await this.#members.authorization(call.caller, backend);
      if (backend.config.upstreamAuth && !authorization) return this.#elicit(call, request, await this.#members.elicit(call, backend));
      if (session.pending) {
        // The account got linked since the member was answered for: it joins now.
        const opened = await this.#linker.open(call, backend.name, backend);
        if (!opened) return this.#elicit(call, request, await this.#members.elicit(call, backend));
        session = opened;
      }
      res = await this.#members.post(call, backend, session, route.message, authorization);
      if (res.status === 401 && backend.config.upstreamAuth) {
        await res.body.dump();
        return this.#elicit(call, request, await this.#members.rejected(call, backend));
      }
      // 403 insufficient_scope: a step-up link for the wider scope, or the error when none can help (as on /mcp/{backend}).
      const stepUp = res.status === 403 && authorization ? await this.#members.stepUp(call, backend, res.headers['www-authenticate']) : undefined;
      if (stepUp) {
        await res.body.dump();
        return 'hopeless' in stepUp ? backendFailureReply(request.id, insufficientScopeError(backend.config, stepUp.hopeless)) : this.#elicit(call, request, stepUp.elicitation);
      }
    } catch (err) {
      if (err instanceof BackendError) return backendFailureReply(request.id, err);
      // A provider that cannot refresh the token right now: the backend side is unavailable.
      return backendFailureReply(request.id, new BackendError(backend.name, 'unreachable', `backend "${backend.name}" could not be authorized (${(err as Error).message})`));
    }
    return this.#toClient(call, backend.name, res, request);
  }

  /**
   * A member's answer on its way to the client: names, URIs and request ids rewritten, the stream
   * kept a stream; an answer the gateway cannot read strictly is refused (member-answer.ts).
   */
  async #toClient(call: AggregateCall, backend: string, res: BackendResponse, request: Request): Promise<BackendResponse> {
    if (res.status === 202) {
      await res.body.dump();
      return emptyResponse(202);
    }
    const answer: MemberAnswer = {
      backend,
      request,
      keeps: this.#keeps,
      refused: (error) => call.caller.log.warn({ backend, method: request.method, unreadable: error.rpcData.unreadable }, 'a backend\'s answer refused: the aggregated endpoint cannot read it'),
    };
    if (res.status === 200 && res.contentType === 'text/event-stream') return sseAnswer(res, answer);
    if (res.status === 200 && res.contentType === 'application/json') return jsonAnswer(res, answer);
    if (mayCarryRequestError(res)) return refusedAnswer(res, answer);
    await res.body.dump().catch(() => {});
    if (res.status === 404) return this.#memberLost(call, backend);
    return backendFailureReply(request.id, new BackendError(backend, 'bad_status', `backend "${backend}" answered HTTP ${res.status}`, res.status));
  }

  /**
   * A member forgot its session (it restarted, say). As on `/mcp/{backend}`, the client's
   * session ends (404) and the client initializes again, which brings every backend back;
   * otherwise that backend would stay unusable for the rest of the session. The other
   * members' sessions are ended too, so they do not linger on their servers.
   */
  #memberLost(call: AggregateCall, backend: string): BackendResponse {
    call.caller.log.warn({ backend }, 'a backend of the aggregated session lost its session; ending the session');
    const others = Object.fromEntries(Object.entries(call.map).filter(([name]) => name !== backend));
    void this.delete({ sessionId: encodeAggregateState({ ...call.state, members: others }), caller: call.caller }).catch(() => {});
    return emptyResponse(404);
  }

  #elicit(call: AggregateCall, request: Request, elicitation: Elicitation): BackendResponse {
    const [message] = elicitationRequiredMessages([request], elicitation, this.#members.publicUrl, supportsUrlElicitation(call.caller.clientCapabilities));
    return jsonResponse(message!);
  }

  /** The client answered a backend's request: back to that backend, with the id it used. */
  async #answerToBackend(call: AggregateCall, message: JsonRpcMessage): Promise<BackendResponse> {
    const target = responseToBackend(message);
    const member = target && this.#members.member(call, target.backend);
    if (!target || !member) {
      call.caller.log.info({ id: message.id }, 'a response names no backend request of this session; dropped');
      return emptyResponse(202);
    }
    const authorization = await this.#members.tokenIfAny(call.caller, member.backend);
    const res = await this.#members.post(call, member.backend, member.session, target.message, authorization);
    await res.body.dump().catch(() => {});
    return emptyResponse(202);
  }

  /** A client notification goes to every member; each backend ignores what it does not know. */
  async #broadcast(call: AggregateCall, message: JsonRpcMessage): Promise<BackendResponse> {
    await Promise.allSettled(
      this.#members.members(call).map(async ({ name, backend, session }) => {
        try {
          const authorization = await this.#members.tokenIfAny(call.caller, backend);
          const res = await this.#members.post(call, backend, session, message, authorization);
          await res.body.dump();
        } catch (err) {
          call.caller.log.warn({ backend: name, method: message.method, err: (err as Error).message }, 'could not deliver a notification to a backend');
        }
      }),
    );
    return emptyResponse(202);
  }

  async #setLevel(call: AggregateCall, request: Request): Promise<BackendResponse> {
    const logging = this.#members.members(call).filter((m) => m.session.capabilities.includes('logging'));
    await Promise.allSettled(
      logging.map(async ({ backend, session }) => {
        const authorization = await this.#members.tokenIfAny(call.caller, backend);
        const res = await this.#members.post(call, backend, session, request, authorization);
        await res.body.dump();
      }),
    );
    return jsonResponse({ jsonrpc: '2.0', id: request.id, result: {} });
  }

  /**
   * A member's GET stream, rewritten; 'none' when it has none to give, 'lost' when it forgot the
   * session. `controller` aborts the member's request: the caller's signal does (followedBy), and
   * so does the fan-out timeout, for this member alone.
   */
  async #openMemberStream(call: AggregateCall, name: string, backend: McpBackend, session: MemberSession, controller: AbortController, lastEventId?: string): Promise<MemberStream | 'none' | 'lost'> {
    const authorization = await this.#members.tokenIfAny(call.caller, backend);
    if (backend.config.upstreamAuth && !authorization) return 'none';
    // Only the wait for the answer is bounded; the stream itself may stay quiet for long.
    const timer = setTimeout(() => controller.abort(), this.#members.fanoutTimeoutMs);
    try {
      const res = await backend.get({ sessionId: session.sessionId, protocolVersion: session.protocolVersion, authorization, lastEventId }, controller.signal);
      clearTimeout(timer);
      if (res.status !== 200 || res.contentType !== 'text/event-stream') {
        await res.body.dump().catch(() => {});
        if (res.status === 404) return 'lost';
        if (res.status !== 405) call.caller.log.warn({ backend: name, status: res.status }, 'backend GET stream not merged into the aggregated stream');
        return 'none';
      }
      const source = transformSse(res.body, (data, id) => {
        const rewritten = data.trim() ? rewriteText(name, data, this.#keeps) : '';
        if (!rewritten) return undefined;
        return lastEventId === undefined ? { data: rewritten } : { data: rewritten, id: id === undefined ? undefined : `${name}:${id}` };
      });
      return { source, close: () => res.body.destroy() };
    } catch (err) {
      clearTimeout(timer);
      call.caller.log.warn({ backend: name, err: (err as Error).message }, 'backend GET stream not merged into the aggregated stream');
      return 'none';
    }
  }

  /** Resumes one member's stream where the gateway's replay log says it stood (`{backend}:{event id}`). */
  async #resumeMemberStream(call: AggregateCall, lastEventId: string, signal: AbortSignal | undefined): Promise<BackendResponse> {
    const at = lastEventId.indexOf(':');
    const member = at > 0 ? this.#members.member(call, lastEventId.slice(0, at)) : undefined;
    // Not 404: that would end the whole aggregated session for one member's stream.
    if (!member) return emptyResponse(502);
    const opened = await this.#openMemberStream(call, member.backend.name, member.backend, member.session, followedBy(signal, 1)[0]!, lastEventId.slice(at + 1));
    if (opened === 'lost') return this.#memberLost(call, member.backend.name);
    return opened === 'none' ? emptyResponse(502) : sseResponse(opened.source);
  }
}

/**
 * `count` controllers that the caller's `signal` aborts, through one listener on it: a merged
 * stream of many members would otherwise add one per member to the one request's signal, past
 * Node's warning bound of ten (a MaxListenersExceededWarning in the log for every such stream).
 */
function followedBy(signal: AbortSignal | undefined, count: number): AbortController[] {
  const controllers = Array.from({ length: count }, () => new AbortController());
  const abortAll = () => {
    for (const controller of controllers) controller.abort();
  };
  if (signal?.aborted) abortAll();
  else signal?.addEventListener('abort', abortAll, { once: true });
  return controllers;
}

/**
 * Rewrites one event of a member's GET stream; '' for a notification `keeps` drops, and for data
 * that is not JSON: the gateway relays only what it could rewrite (issue 41 §1).
 */
function rewriteText(backend: string, text: string, keeps?: AggregateEndpoint['keeps']): string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return '';
  }
  const one = (m: unknown) => (m && typeof m === 'object' ? messageToClient(backend, m as JsonRpcMessage, () => undefined) : m);
  if (Array.isArray(value)) return JSON.stringify(value.map(one));
  const message = one(value) as JsonRpcMessage;
  if (keeps && message && typeof message === 'object' && isNotification(message) && !keeps(backend, message)) return '';
  return JSON.stringify(message);
}

const isNotification = (m: JsonRpcMessage) => typeof m.method === 'string' && m.id === undefined;
