/**
 * What the MCP layer needs from a backend: the three verbs of the Streamable HTTP transport
 * (MCP 2025-11-25 "Transports"). A real server is reached through StreamableHttpBackend;
 * the aggregated endpoint `/mcp` (SPEC §2) is a gateway-made backend with the same face,
 * so sessions, relays, replay and resumption work for it unchanged.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { Principal } from '../auth/principal.js';
import type { SubjectToken } from '../auth/subject-token.js';
import type { BackendConfig } from '../config/schema.js';
import type { BackendBody } from './body.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';

/** W3C trace context as a backend call carries it (headers, and `params._meta` with telemetry on). */
export interface TraceHeaders {
  traceparent?: string;
  tracestate?: string;
  baggage?: string;
}

/**
 * The SERVER span of the client request a backend call serves, when `telemetry` is on
 * (src/telemetry/): the context to carry to the backend, its trace id (the audit record's
 * `traceId`), and where the backend's answers are reported so the span gets their outcome.
 */
export interface CallTrace {
  /** "" when {@link unsampledRoot}. */
  readonly traceId: string;
  readonly headers: TraceHeaders;
  /** Not sampled, and its client sent no context: nothing is carried to the backend (issue 44; telemetry/otel-sdk.ts startSpan). */
  readonly unsampledRoot?: boolean;
  observe(message: JsonRpcMessage): void;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the MCP routes when `telemetry` is on (src/telemetry/); read by callerOf and traceHeaders. */
    traceScope?: CallTrace;
    /** Set by the MCP routes: the body and its messages as parsed there, for callerOf (BackendCaller.parsed). */
    rpcParsed?: BackendCaller['parsed'];
  }
}

/** Who is calling: a real backend ignores it; the aggregated backend routes and authorizes with it. */
export interface BackendCaller {
  principal: Principal;
  /** The gateway session (absent during initialize). */
  sessionId?: string;
  clientCapabilities?: Record<string, unknown>;
  log: FastifyBaseLogger;
  /** The caller's own token, for backends with `tokenExchange` only (src/exchange/); never sent as it is. */
  subjectToken?: SubjectToken;
  /**
   * Of the client's HTTP request this call serves, what `policy.rules` and the audit trail read
   * (src/policy/): its headers, address (after `listen.trustProxy`) and URL. Never the request
   * itself: a caller may outlive its call (streams), and must not keep the request's body alive.
   */
  headers?: IncomingHttpHeaders;
  address?: string;
  url?: string;
  /** The SERVER span of the request, with `telemetry` on (src/telemetry/). */
  trace?: CallTrace;
  /**
   * The route's parse of the body it forwards (mcp/routes.ts): a face handed that very text
   * reads these messages instead of parsing it again (policy/tool-policy-backend.ts messagesOf;
   * issue 44 part 1). The route's parse is the stricter one (its batch rule is the revision's),
   * so what it accepted a face's own parse would too. A face that rewrote the body parses its own.
   * Only a POST's caller has it (the long-lived GET streams' callers do not), and it lives no
   * longer than that POST's request, whose body the request holds anyway.
   */
  parsed?: {
    readonly text: string;
    readonly messages: readonly JsonRpcMessage[];
    /** Of one message: the index of the quote closing its top-level `params` name in `text` (wire/json-guard.ts topParamsName), -1 when none. */
    readonly paramsName?: number;
  };
  /**
   * A 2026-07-28 client's request only (stateless/stateless-post.ts): seals the gateway's own
   * `requestState` for this request as the client sent it to its endpoint (stateless/request-state.ts),
   * so a face may answer `input_required` itself and know the retry is this request's
   * (policy/confirm-hold.ts, issue 46 §2). Absent in the session era.
   */
  sealState?: (purpose: string) => string;
  /** A call through a virtual server: the server and the tool as the client saw them (aggregate/virtual-server.ts), for the approval page (issue 46 §6). */
  shownAs?: { server: string; tool: string };
}

export interface BackendCallHeaders {
  sessionId?: string;
  protocolVersion?: string;
  lastEventId?: string;
  /** The user's third-party token (`upstreamAuth`) or a token exchanged for the user (`tokenExchange`); never the client's own. */
  authorization?: string;
  /**
   * MCP 2026-07-28 standard request headers (Transports §Standard Request Headers and §Custom
   * Headers from Tool Parameters), as the MCP layer built them for this message and already
   * encoded: `mcp-method`, `mcp-name`, `mcp-param-*`. Only names of those shapes are sent
   * (streamable-http.ts), so nothing else a client sent can ride along.
   */
  protocolHeaders?: Record<string, string>;
  /** W3C trace context, carried through when the client sent it (with `telemetry` on: the gateway's span). */
  traceparent?: string;
  tracestate?: string;
  /** W3C baggage: sent only with `telemetry` on (src/telemetry/), which propagates it. */
  baggage?: string;
  caller?: BackendCaller;
}

export interface BackendResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: BackendBody;
  contentType: string;
  /** Answered by the gateway in the backend's place, which never saw the request (a tool policy's refusal). */
  refused?: boolean;
}

export interface McpBackend {
  readonly name: string;
  readonly config: BackendConfig;
  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse>;
  get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse>;
  delete(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse>;
  /**
   * Ends the backend's client. Exchanges in flight may finish for up to `graceMs` (default: as
   * long as they take, as a reload retiring a backend wants), then are cut: at shutdown the
   * clients are gone, and a stream the gateway holds toward the backend (a listen, a GET
   * stream) would otherwise hold the close for ever.
   */
  close(graceMs?: number): Promise<void>;
}
