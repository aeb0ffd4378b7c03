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
  /** W3C trace context, carried through when the client sent it. */
  traceparent?: string;
  tracestate?: string;
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
  close(): Promise<void>;
}
