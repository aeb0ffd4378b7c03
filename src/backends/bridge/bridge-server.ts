/**
 * The local bridge for one legacy HTTP+SSE backend (MCP 2024-11-05): an internal Streamable HTTP
 * endpoint (MCP 2025-11-25 "Transports") on 127.0.0.1, on a free port, that the gateway's
 * ordinary StreamableHttpBackend talks to (stdio backends need no such hop: stdio-backend.ts
 * answers the gateway in-process). The whole MCP layer (relays, replay logs,
 * timeouts, upstream auth) therefore treats these backends like any other (SPEC §1,
 * backend side), and only this small server knows about legacy SSE.
 *
 * Each `initialize` POST (no Mcp-Session-Id) opens a session (bridge-session.ts); requests
 * naming an unknown or ended session get 404, which the gateway turns into "session
 * ended". The endpoint is not exposed: it listens on loopback only and every request must
 * carry a random per-bridge key, which only the gateway's backend client sends — another
 * local process or a DNS-rebound browser page cannot open connections through it.
 *
 * Sessions live in this process's memory, so such backends are single-replica only (the
 * config refuses them together with `redis`, src/config/schema.ts). Each costs a
 * connection, so they are capped per backend and per user (session-slots.ts; the gateway
 * names the user in an internal header, bridge-headers.ts) and end when idle.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { BackendConfig } from '../../config/schema.js';
import { ErrorCode, errorResponse } from '../../wire/jsonrpc.js';
import { openBackendLink, type BackendLink } from './backend-link.js';
import { BRIDGE_KEY_HEADER, BRIDGE_USER_HEADER } from './bridge-headers.js';
import { BridgeSession } from './bridge-session.js';
import type { BridgeLogger } from './logger.js';
import { capRefusal, slotUser, startFailure } from './session-refusals.js';
import { DEFAULT_MAX_BRIDGE_SESSIONS, DEFAULT_MAX_BRIDGE_SESSIONS_PER_USER, SessionSlots, type Slot } from './session-slots.js';

export { BRIDGE_KEY_HEADER, BRIDGE_USER_HEADER } from './bridge-headers.js';


const PATH = '/mcp';
/** The gateway's own default for `limits.maxBodyBytes`. */
const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface BridgeServerOptions {
  /** The backend as configured (transport sse). */
  backend: BackendConfig;
  /** A session with no traffic and no open request for this long ends (`bridge.idleTimeout`). */
  idleMs: number;
  /** `bridge.maxSessions`: sessions of this backend for all users. */
  maxSessions?: number;
  /** `bridge.maxSessionsPerUser`: sessions of this backend for one user. */
  maxSessionsPerUser?: number;
  /** `limits.maxBodyBytes`: the bridge accepts whatever the gateway accepted. */
  maxBodyBytes?: number;
  log: BridgeLogger;
}

export class BridgeServer {
  readonly #options: BridgeServerOptions;
  readonly #key = randomBytes(32).toString('base64url');
  readonly #server: Server;
  /** Sessions by Mcp-Session-Id. */
  readonly #sessions = new Map<string, BridgeSession>();
  /** Every live session, including those still initializing. */
  readonly #live = new Set<BridgeSession>();
  /** Sessions open or starting, per backend and per user. */
  readonly #slots: SessionSlots;
  #url: string | undefined;
  #closing = false;

  constructor(options: BridgeServerOptions) {
    this.#options = options;
    this.#slots = new SessionSlots(options.maxSessions ?? DEFAULT_MAX_BRIDGE_SESSIONS, options.maxSessionsPerUser ?? DEFAULT_MAX_BRIDGE_SESSIONS_PER_USER);
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((err: Error) => {
        options.log.error({ backend: options.backend.name, err: err.message }, 'bridge: request failed');
        if (!res.headersSent) sendJson(res, 500, errorResponse(null, ErrorCode.InternalError, 'Internal error'));
        else res.destroy();
      });
    });
  }

  /** Sessions open right now (tests, metrics). */
  get sessionCount(): number {
    return this.#slots.size;
  }

  /** Listens on 127.0.0.1 on a free port. */
  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen({ host: '127.0.0.1', port: 0 }, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    // Never the reason the process stays up: the gateway closes the bridge on shutdown.
    this.#server.unref();
    const { port } = this.#server.address() as AddressInfo;
    this.#url = `http://127.0.0.1:${port}${PATH}`;
  }

  /**
   * The configuration the gateway's StreamableHttpBackend uses for this backend: the same
   * (name, timeout, access, upstreamAuth, …) with the url pointing here, and the bridge key
   * added to the static headers.
   */
  gatewayConfig(): BackendConfig {
    if (!this.#url) throw new Error('bridge not started');
    const { backend } = this.#options;
    return { ...backend, url: this.#url, headers: { ...backend.headers, [BRIDGE_KEY_HEADER]: this.#key } };
  }

  /** Ends every session (SSE connections closed) and stops listening. */
  async close(): Promise<void> {
    this.#closing = true;
    await Promise.allSettled([...this.#live].map((s) => s.end('the gateway is shutting down')));
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://bridge').pathname;
    if (path !== PATH) return sendJson(res, 404, errorResponse(null, ErrorCode.InvalidRequest, 'Not found'));
    if (!this.#keyMatches(req.headers[BRIDGE_KEY_HEADER])) return sendJson(res, 403, errorResponse(null, ErrorCode.InvalidRequest, 'Forbidden'));
    if (this.#closing) return sendJson(res, 503, errorResponse(null, ErrorCode.BackendUnavailable, 'The gateway is shutting down'));
    const sessionId = req.headers['mcp-session-id'];
    if (sessionId !== undefined) {
      const session = typeof sessionId === 'string' ? this.#sessions.get(sessionId) : undefined;
      if (!session || session.ended) return sendJson(res, 404, errorResponse(null, -32001, 'Session not found'));
      return session.handle(req, res);
    }
    if (req.method !== 'POST') return sendJson(res, 400, errorResponse(null, ErrorCode.InvalidRequest, 'Bad Request: Mcp-Session-Id header is required'));
    const text = await readBody(req, this.#options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
    if (text === undefined) return sendJson(res, 413, errorResponse(null, ErrorCode.InvalidRequest, 'Payload Too Large'));
    let message: JSONRPCMessage;
    try {
      message = JSON.parse(text) as JSONRPCMessage;
    } catch {
      return sendJson(res, 400, errorResponse(null, ErrorCode.ParseError, 'Parse error: Invalid JSON'));
    }
    const id = (message as { id?: unknown }).id;
    if ((message as { method?: unknown }).method !== 'initialize' || (typeof id !== 'string' && typeof id !== 'number')) {
      return sendJson(res, 400, errorResponse(null, ErrorCode.InvalidRequest, 'Bad Request: Mcp-Session-Id header is required'));
    }
    return this.#openSession(req, res, message, id);
  }

  async #openSession(req: IncomingMessage, res: ServerResponse, message: JSONRPCMessage, initializeId: RequestId): Promise<void> {
    const { backend, log } = this.#options;
    const header = req.headers[BRIDGE_USER_HEADER];
    const slot = this.#slots.take(slotUser(typeof header === 'string' ? header : undefined));
    if (typeof slot === 'string') {
      const refused = capRefusal(backend, this.#slots, slot, initializeId, log);
      return sendJson(res, refused.status, refused.message);
    }
    let link;
    try {
      link = await openBackendLink(backend, backend.timeout);
    } catch (err) {
      slot.release();
      // A JSON-RPC answer to initialize: the gateway passes it to the client as it is.
      return sendJson(res, 200, startFailure(backend, initializeId, err, log));
    }
    return this.#startSession(req, res, message, initializeId, link, slot);
  }

  async #startSession(req: IncomingMessage, res: ServerResponse, message: JSONRPCMessage, initializeId: RequestId, link: BackendLink, slot: Slot): Promise<void> {
    const { backend, log } = this.#options;
    const session = new BridgeSession({
      backend,
      link,
      idleMs: this.#options.idleMs,
      maxBodyBytes: this.#options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
      initializeId,
      log,
      onInitialized: (s) => this.#sessions.set(s.id!, s),
      onEnded: (s) => {
        this.#live.delete(s);
        if (s.id) this.#sessions.delete(s.id);
        slot.release();
      },
    });
    this.#live.add(session);
    if (this.#closing) return void session.end('the gateway is shutting down');
    log.info({ backend: backend.name, transport: backend.transport }, 'bridge session started');
    await session.handle(req, res, message);
    // The SDK refused the initialize (malformed): nothing will ever use this session.
    if (!session.id) await session.end('initialize was refused');
  }

  #keyMatches(given: string | string[] | undefined): boolean {
    if (typeof given !== 'string') return false;
    const a = Buffer.from(given);
    const b = Buffer.from(this.#key);
    return a.length === b.length && timingSafeEqual(a, b);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** The request body as text, or undefined when it exceeds `limit` bytes. */
async function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
