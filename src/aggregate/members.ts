/**
 * Calling one member backend on behalf of an aggregated session: the backend's own session
 * id and protocol revision, the user's third-party token where the backend has
 * `upstreamAuth` (SPEC §4), and the access policy (a backend the user may no longer use is
 * treated as absent). The client's own token is never sent (no token passthrough).
 */
import type { BackendCaller, BackendResponse, McpBackend } from '../backends/backend.js';
import type { Elicitation } from '../connect/elicitations.js';
import type { McpContext } from '../mcp/context.js';
import { backendAccessDenial } from '../policy/backend-access.js';
import type { AggregateState, MemberSession, SessionMap } from './session-map.js';

export interface AggregateCall {
  caller: BackendCaller;
  /** The session's members (`state.members`). */
  map: SessionMap;
  state: AggregateState;
  traceparent?: string;
  tracestate?: string;
}

export type Authorization = { authorization?: string } | { elicitation: Elicitation };

export class Members {
  constructor(private readonly ctx: McpContext) {}

  /** Backends this user may use now, in configuration order. */
  allowed(caller: BackendCaller): McpBackend[] {
    const tenantClaim = this.ctx.config.auth.tenantClaim;
    return [...this.ctx.backends.values()].filter((b) => !backendAccessDenial(caller.principal, b.config, tenantClaim));
  }

  /** The member backend `name` of this session, if it joined and the user may still use it. */
  member(call: AggregateCall, name: string): { backend: McpBackend; session: MemberSession } | undefined {
    const session = call.map[name];
    const backend = this.ctx.backends.get(name);
    if (!session || !backend) return undefined;
    if (backendAccessDenial(call.caller.principal, backend.config, this.ctx.config.auth.tenantClaim)) return undefined;
    return { backend, session };
  }

  /** Joined members the user may still use, in session order. */
  members(call: AggregateCall): Array<{ name: string; backend: McpBackend; session: MemberSession }> {
    return Object.keys(call.map).flatMap((name) => {
      const m = this.member(call, name);
      return m ? [{ name, ...m }] : [];
    });
  }

  /** `{}` for a backend without third-party auth; the token, or the elicitation that must come first. */
  async authorize(caller: BackendCaller, backend: McpBackend): Promise<Authorization> {
    if (!backend.config.upstreamAuth || !this.ctx.upstream) return {};
    return this.ctx.upstream.authorize(caller.principal, backend.config, caller.sessionId);
  }

  /**
   * The token when the user has one, else undefined: for messages that owe the client no
   * answer (notifications, responses, DELETE, the GET stream), where asking the user to link
   * an account would help nobody. An elicitation started on the way is discarded.
   */
  async tokenIfAny(caller: BackendCaller, backend: McpBackend): Promise<string | undefined> {
    const auth = await this.authorize(caller, backend).catch(() => undefined);
    if (auth && 'elicitation' in auth) await this.discard(auth.elicitation).catch(() => {});
    return auth && 'authorization' in auth ? auth.authorization : undefined;
  }

  /** The backend refused the token: forget it and start a new elicitation. */
  rejected(caller: BackendCaller, backend: McpBackend): Promise<Elicitation> {
    return this.ctx.upstream!.rejected(caller.principal, backend.config, caller.sessionId);
  }

  /** Discards an elicitation nobody will be shown (a call that went on without a token). */
  async discard(elicitation: Elicitation): Promise<void> {
    await this.ctx.upstream?.discard(elicitation);
  }

  post(call: AggregateCall, backend: McpBackend, session: MemberSession | undefined, message: unknown, authorization: string | undefined, signal?: AbortSignal): Promise<BackendResponse> {
    return backend.post(
      JSON.stringify(message),
      { sessionId: session?.sessionId, protocolVersion: session?.protocolVersion, authorization, traceparent: call.traceparent, tracestate: call.tracestate },
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
