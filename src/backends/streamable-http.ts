/**
 * Client side of the Streamable HTTP transport towards one backend MCP server
 * (MCP 2025-11-25 "Transports"). It only moves bytes and headers: the MCP layer decides
 * what to send. Connections are pooled and kept alive per backend (undici Agent); each
 * exchange goes through undici's dispatcher directly (exchange.ts).
 *
 * Hop-by-hop hygiene: only the headers below are sent. The client's `Authorization`,
 * cookies and its gateway session id never reach the backend (no token passthrough); of the
 * 2026-07-28 request headers the MCP layer hands over, only the standard ones are. A local
 * bridge (its key among the static headers) is also told the caller's user key, so that it
 * can cap sessions per user (bridge/bridge-headers.ts); no other backend is. A `DPoP <token>`
 * authorization goes with a proof of the link's key on every request (dpop-exchange.ts).
 */
import { Agent } from 'undici';
import type { BackendCallHeaders, BackendResponse, McpBackend } from './backend.js';
import type { BackendConfig } from '../config/schema.js';
import { untilAborted } from './abortable.js';
import { BackendError, toBackendError } from './errors.js';
import { dpopKeyFor } from './dpop.js';
import { dpopExchange } from './dpop-exchange.js';
import { exchange } from './exchange.js';
import { BRIDGE_KEY_HEADER, BRIDGE_USER_HEADER } from './bridge/bridge-headers.js';
import { mediaTypeOf } from '../wire/headers.js';
import { HEADER } from '../wire/protocol.js';

export type { BackendCallHeaders, BackendResponse } from './backend.js';

export class StreamableHttpBackend implements McpBackend {
  readonly name: string;
  /** The backend's configuration (e.g. its `upstreamAuth`), so callers need not look it up. */
  readonly config: BackendConfig;
  readonly #origin: string;
  readonly #path: string;
  readonly #staticHeaders: Record<string, string>;
  readonly #agent: Agent;
  readonly #timeoutMs: number;
  readonly #isBridge: boolean;

  constructor(config: BackendConfig) {
    this.name = config.name;
    this.config = config;
    const url = new URL(config.url!);
    this.#origin = url.origin;
    this.#path = `${url.pathname}${url.search}`;
    this.#staticHeaders = lowerCaseKeys(config.headers);
    this.#isBridge = BRIDGE_KEY_HEADER in this.#staticHeaders;
    this.#timeoutMs = config.timeout;
    this.#agent = new Agent({ keepAliveTimeout: 30_000, connectTimeout: Math.min(config.timeout, 10_000) });
  }

  /** POSTs one JSON-RPC message (or batch) as the client sent it. */
  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#send('POST', headers, signal, body, 'application/json, text/event-stream');
  }

  /** Opens (or resumes, with `lastEventId`) the backend's standalone SSE stream. */
  get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#send('GET', headers, signal, undefined, 'text/event-stream');
  }

  /** Ends the backend session (DELETE with its session id). */
  delete(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#send('DELETE', headers, signal, undefined, 'application/json, text/event-stream');
  }

  async close(graceMs = Infinity): Promise<void> {
    if (graceMs === Infinity) return this.#agent.close();
    await untilAborted(this.#agent.close(), AbortSignal.timeout(graceMs)).catch(() => this.#agent.destroy());
  }

  async #send(method: 'GET' | 'POST' | 'DELETE', h: BackendCallHeaders, signal: AbortSignal | undefined, body: string | undefined, accept: string): Promise<BackendResponse> {
    const headers: Record<string, string> = { ...this.#staticHeaders, accept };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (h.sessionId) headers['mcp-session-id'] = h.sessionId;
    if (h.protocolVersion) headers['mcp-protocol-version'] = h.protocolVersion;
    if (h.lastEventId) headers['last-event-id'] = h.lastEventId;
    if (h.protocolHeaders) addProtocolHeaders(headers, h.protocolHeaders);
    if (h.authorization) headers.authorization = h.authorization;
    if (h.traceparent) headers.traceparent = h.traceparent;
    if (h.tracestate) headers.tracestate = h.tracestate;
    if (h.baggage) headers.baggage = h.baggage;
    if (this.#isBridge && h.caller) headers[BRIDGE_USER_HEADER] = h.caller.principal.userKey;
    const send = (withHeaders: Record<string, string>) =>
      exchange(this.#agent, {
        origin: this.#origin,
        path: this.#path,
        method,
        headers: withHeaders,
        body,
        signal,
        headersTimeout: this.#timeoutMs,
        // A standalone GET stream may legitimately be quiet for long; POST streams must make
        // progress within the backend's timeout.
        bodyTimeout: method === 'GET' ? 0 : this.#timeoutMs,
      });
    // A DPoP-bound token (RFC 9449 §7): a proof per request, the server's nonce honoured.
    const dpop = dpopKeyFor(h.authorization);
    if (dpop === null) throw new BackendError(this.name, 'protocol', `no DPoP key is held for the linked account of backend "${this.name}"`);
    try {
      const res = dpop ? await dpopExchange(this.name, dpop, method, `${this.#origin}${this.#path}`, headers, send) : await send(headers);
      return { status: res.status, headers: res.headers, body: res.body, contentType: mediaTypeOf(res.headers['content-type']) };
    } catch (err) {
      throw toBackendError(this.name, err, 'connect');
    }
  }
}

/**
 * The 2026-07-28 standard headers of one message: `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`
 * (Transports §Standard Request Headers), and nothing else under that name — the map is built
 * from a client's request, so a stray `authorization` or `mcp-session-id` in it must not pass.
 */
function addProtocolHeaders(headers: Record<string, string>, protocolHeaders: Record<string, string>): void {
  for (const name in protocolHeaders) {
    const lower = name.toLowerCase();
    if (lower === HEADER.method || lower === HEADER.name || (lower.startsWith(HEADER.paramPrefix) && lower.length > HEADER.paramPrefix.length)) {
      headers[lower] = protocolHeaders[name]!;
    }
  }
}

function lowerCaseKeys(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
}
