/**
 * The WebSocket client, as every loopback request of its connection is judged (issue 41 §3).
 *
 * The bridge (websocket-bridge.ts) re-posts each frame to `/mcp…` from the gateway itself,
 * so without this the HTTP path would see the loopback socket: `source.address` 127.0.0.1 in
 * policy rules, the access log, telemetry, and only the bridge's few headers in
 * `request.headers`. Instead, each connection is admitted here when it opens: the upgrade
 * request's address (`request.ip`, which already follows `listen.trustProxy` and
 * X-Forwarded-For, as on HTTP) and its headers are kept in memory under a token of 256
 * random bits, and the bridge sends only that token, in {@link BRIDGE_HEADER}. The first
 * `onRequest` hook of every `/mcp…` route looks it up and, when it names a live connection,
 * gives the request that client's `ip` (and `ips`) and the upgrade's headers under the
 * bridge's own.
 *
 * Why a token and not the address in a header: nothing that travels can be forged into an
 * address. A request whose token is unknown (a client sending the header itself, or a
 * connection already gone) keeps its own socket's address and headers; the header is removed
 * from every `/mcp…` request either way, so no rule, log or backend ever sees a token. The
 * token lives only in this process and is forgotten when its connection has ended.
 *
 * Headers: the upgrade's, without what belongs to that one request and not to the client —
 * hop-by-hop and WebSocket handshake fields, body framing, content negotiation and the MCP
 * headers the bridge sets per message — then the loopback request's own (authorization and
 * host, the same values as the upgrade; accept, content-type, the session and revision).
 * `authorization`, `proxy-authorization` and `cookie` reach `request.headers` as on HTTP;
 * policy rules never see them (policy/policy-input.ts).
 */
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyRequest, onRequestHookHandler, RouteOptions } from 'fastify';
import { prependHook } from '../http/route-hooks.js';

/** The loopback request header that names the connection (never the address itself). */
export const BRIDGE_HEADER = 'x-switchboard-bridge';

/** The routes the bridge speaks to. */
const BRIDGED_ROUTE = /^\/mcp(\/|$)/;

/** Upgrade headers that describe the handshake or one request, not the client. */
const NOT_CARRIED = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'http2-settings',
  'sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol', 'sec-websocket-accept',
  'content-length', 'content-type', 'content-encoding', 'expect', 'accept', 'accept-encoding', 'last-event-id',
  BRIDGE_HEADER,
]);

export interface BridgedClient {
  ip: string;
  /** With `listen.trustProxy`: the client and the proxies, as Fastify's `request.ips`. */
  ips?: string[];
  headers: IncomingHttpHeaders;
}

/** The upgrade request's headers as the loopback requests carry them. */
export function carriedHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || NOT_CARRIED.has(name) || name.startsWith('mcp-')) continue;
    out[name] = value;
  }
  return out;
}

export class BridgedClients {
  readonly #clients = new Map<string, BridgedClient>();

  /** The live connections (tests, metrics). */
  get size(): number {
    return this.#clients.size;
  }

  /** Keeps the upgrade request's client; the token goes on each loopback request in {@link BRIDGE_HEADER}. */
  admit(request: FastifyRequest): string {
    const token = randomBytes(32).toString('base64url');
    const { ips } = request as { ips?: string[] };
    this.#clients.set(token, { ip: request.ip, ...(ips ? { ips } : {}), headers: carriedHeaders(request.headers) });
    return token;
  }

  /** Once the connection's last loopback request (the session's DELETE) is done. */
  release(token: string): void {
    this.#clients.delete(token);
  }

  /**
   * Attaches {@link adopt} as the first `onRequest` hook of every `/mcp…` route declared after
   * this call: before the Host/Origin check, authentication, the access policy and the rate limit.
   */
  attach(app: FastifyInstance): this {
    const hook: onRequestHookHandler = (request, _reply, done) => {
      this.adopt(request);
      done();
    };
    app.addHook('onRoute', (route: RouteOptions) => {
      if (BRIDGED_ROUTE.test(route.url)) route.onRequest = prependHook(route.onRequest, hook);
    });
    return this;
  }

  /** A request from the bridge takes its client's address and headers; any other only loses the header. */
  adopt(request: FastifyRequest): void {
    const raw = request.raw;
    const token = raw.headers[BRIDGE_HEADER];
    if (token === undefined) return;
    const client = typeof token === 'string' ? this.#clients.get(token) : undefined;
    if (!client) {
      delete raw.headers[BRIDGE_HEADER];
      return;
    }
    const headers: IncomingHttpHeaders = { ...client.headers, ...raw.headers };
    delete headers[BRIDGE_HEADER];
    raw.headers = headers;
    // Own properties in front of Fastify's getters, for this request only.
    Object.defineProperty(request, 'ip', { value: client.ip, configurable: true, enumerable: true });
    if (client.ips) Object.defineProperty(request, 'ips', { value: client.ips, configurable: true, enumerable: true });
  }
}
