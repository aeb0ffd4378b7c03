/**
 * Calling one member backend on behalf of an aggregated session: the backend's own session
 * id and protocol revision, the user's third-party token where the backend has
 * `upstreamAuth` (SPEC §4) or a token exchanged for the user's with `tokenExchange` (§8),
 * and the access policy (a backend the user may no longer use is
 * treated as absent). The client's own token is never sent (no token passthrough).
 */
import type { BackendCaller, BackendResponse, McpBackend } from '../backends/backend.js';
import type { Elicitation } from '../connect/elicitations.js';
import type { StepUp } from '../connect/upstream-auth.js';
import type { LinkingContext } from '../linking/linking.js';
import type { BackendCatalog } from '../linking/catalog.js';
import { LIST_CAPABILITIES } from '../linking/provisional.js';
import { backendAccessDenial } from '../policy/backend-access.js';
import type { AggregateState, MemberSession, SessionMap } from './session-map.js';

export interface AggregateCall {
  caller: BackendCaller;
  /** The session's members (`state.members`). */
  map: SessionMap;
  state: AggregateState;
  traceparent?: string;
  tracestate?: string;
  baggage?: string;
}

export class Members {
  /** @param only the backends a virtual server is built from (virtual-server.ts); all of them for `/mcp`. */
  constructor(
    private readonly ctx: LinkingContext,
    private readonly only?: ReadonlySet<string>,
  ) {}

  /** Backends this user may use now, in configuration order. */
  allowed(caller: BackendCaller): McpBackend[] {
    const tenantClaim = this.ctx.config.auth.tenantClaim;
    return [...this.ctx.backends.values()].filter((b) => (!this.only || this.only.has(b.name)) && !backendAccessDenial(caller.principal, b.config, tenantClaim));
  }

  /** The member backend `name` of this session, if it joined and the user may still use it. */
  member(call: AggregateCall, name: string): { backend: McpBackend; session: MemberSession } | undefined {
    const session = call.map[name];
    const backend = this.ctx.backends.get(name);
    if (!session || !backend || (this.only && !this.only.has(name))) return undefined;
    if (backendAccessDenial(call.caller.principal, backend.config, this.ctx.config.auth.tenantClaim)) return undefined;
    return { backend, session };
  }

  /** Joined members the user may still use, in session order; members waiting for the user's link have no backend session and are left out. */
  members(call: AggregateCall): Array<{ name: string; backend: McpBackend; session: MemberSession }> {
    return Object.keys(call.map).flatMap((name) => {
      const m = this.member(call, name);
      return m && !m.session.pending ? [{ name, ...m }] : [];
    });
  }

  /**
   * The user's Authorization header for a backend with `upstreamAuth` (undefined when none
   * is linked) or `tokenExchange` (a token exchanged for the user, src/exchange/), undefined
   * for other backends; throws when a due refresh or the exchange cannot be done now.
   */
  async authorization(caller: BackendCaller, backend: McpBackend): Promise<string | undefined> {
    if (backend.config.tokenExchange) return this.ctx.exchange?.authorizationFor(caller, backend.config);
    if (!backend.config.upstreamAuth) return undefined;
    return this.ctx.upstream.linkedAuthorization(caller.principal, backend.config);
  }

  /**
   * The user's token for a backend with `upstreamAuth`, else undefined (none linked, or it
   * cannot be refreshed right now): the one rule of upstream-auth.ts. Starts nothing.
   */
  async tokenIfAny(caller: BackendCaller, backend: McpBackend): Promise<string | undefined> {
    return this.authorization(caller, backend).catch(() => undefined);
  }

  /** Starts the elicitation a client is about to be shown, and remembers the session as waiting for the link. */
  async elicit(call: AggregateCall, backend: McpBackend): Promise<Elicitation> {
    await this.waitForLink(call, backend);
    return this.ctx.upstream.elicit(call.caller.principal, backend.config, call.caller.sessionId);
  }

  /** Remembers the session as waiting for the user's link to this backend's provider (linking/waiters.ts). */
  async waitForLink(call: AggregateCall, backend: McpBackend): Promise<void> {
    const { sessionId, principal } = call.caller;
    if (!sessionId || !backend.config.upstreamAuth ) return;
    const lists = call.state.announced.filter((name) => (LIST_CAPABILITIES as readonly string[]).includes(name));
    await this.ctx.linking.waiters.add(principal.userKey, backend.config.upstreamAuth.provider, { sessionId, lists }).catch(() => {});
  }

  /** The backend refused the token: forget it, so that the next message asks for the link again. */
  async forgetToken(call: AggregateCall, backend: McpBackend): Promise<void> {
    await this.ctx.upstream.forget(call.caller.principal, backend.config);
  }

  /** The member answered the user's token with 403: a step-up link, the error when none can help, or undefined (connect/upstream-auth.ts). */
  stepUp(call: AggregateCall, backend: McpBackend, wwwAuthenticate: string | string[] | undefined): Promise<StepUp | undefined> {
    return this.ctx.upstream.stepUp(call.caller.principal, backend.config, wwwAuthenticate, call.caller.sessionId);
  }

  /** The backend refused the token: forget it and start a new elicitation. */
  async rejected(call: AggregateCall, backend: McpBackend): Promise<Elicitation> {
    await this.forgetToken(call, backend);
    return this.elicit(call, backend);
  }

  /** Catalog of backends that need the user's account. */
  get catalog(): BackendCatalog {
    return this.ctx.linking.catalog;
  }

  /** `notifications/initialized` to a member that just joined (MCP 2025-11-25 "Lifecycle"); best effort. */
  async sendInitialized(call: AggregateCall, backend: McpBackend, session: MemberSession): Promise<void> {
    const authorization = await this.tokenIfAny(call.caller, backend);
    await this.post(call, backend, session, { jsonrpc: '2.0', method: 'notifications/initialized' }, authorization)
      .then((res) => res.body.dump())
      .catch(() => {});
  }

  post(call: AggregateCall, backend: McpBackend, session: MemberSession | undefined, message: unknown, authorization: string | undefined, signal?: AbortSignal): Promise<BackendResponse> {
    // The caller goes along: a backend with `tokenExchange` exchanges for that user (and a 401
    // costs one fresh exchange and a retry); a stdio/SSE bridge counts the user's share.
    const { caller } = call;
    return backend.post(
      JSON.stringify(message),
      { sessionId: session?.sessionId, protocolVersion: session?.protocolVersion, authorization, traceparent: call.traceparent, tracestate: call.tracestate, baggage: call.baggage, caller },
      signal,
    );
  }

  get publicUrl(): string {
    return this.ctx.config.publicUrl;
  }

  get fanoutTimeoutMs(): number {
    return this.ctx.config.aggregate.fanoutTimeout;
  }
}
