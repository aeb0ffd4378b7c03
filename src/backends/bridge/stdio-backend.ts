/**
 * A stdio backend (MCP 2025-11-25 "Transports", stdio) as the MCP layer sees every backend:
 * the three verbs of Streamable HTTP (backend.ts), answered in this process without any HTTP.
 * Each `initialize` without a session starts a child (stdio-session.ts) for that one gateway
 * session; its later POSTs, GET and DELETE name it by the session id this answered with, and
 * an id that names no live session is 404, which the gateway turns into "session ended".
 *
 * Why not the loopback bridge it replaces: that was a second HTTP hop inside the gateway —
 * undici over 127.0.0.1 into the SDK's Streamable HTTP server transport (web Request and
 * Response through @hono/node-server, zod on every message), which wrote to the child, and
 * the answer came back as SSE to be reshaped — about half the gateway's CPU per call on a
 * stdio backend (issue 44, docs/performance.md "stdio backends"). Here a POST is one write to
 * stdin and the answer the child's line itself.
 *
 * Sessions live in this process's memory, so stdio backends are single-replica only (the
 * config refuses them together with `redis`, src/config/schema.ts). Each costs a child, so
 * they are capped per backend and per user (session-slots.ts: `bridge.maxSessions`,
 * `bridge.maxSessionsPerUser`, the user named by the caller's principal) and end when idle.
 */
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { BackendConfig } from '../../config/schema.js';
import { ErrorCode, errorResponse } from '../../wire/jsonrpc.js';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backend.js';
import type { BridgeLogger } from './logger.js';
import { emptyAnswer, jsonAnswer } from './plain-answers.js';
import { tiedTo } from './signal-tie.js';
import { capRefusal, slotUser, startFailure } from './session-refusals.js';
import { DEFAULT_MAX_BRIDGE_SESSIONS, DEFAULT_MAX_BRIDGE_SESSIONS_PER_USER, SessionSlots } from './session-slots.js';
import { StdioSession, type OutgoingMessage } from './stdio-session.js';

export interface StdioBackendOptions {
  /** The backend as configured (transport stdio). */
  backend: BackendConfig;
  /** A session with no traffic and no open request for this long ends (`bridge.idleTimeout`). */
  idleMs: number;
  /** `bridge.maxSessions`: sessions of this backend for all users. */
  maxSessions?: number;
  /** `bridge.maxSessionsPerUser`: sessions of this backend for one user. */
  maxSessionsPerUser?: number;
  log: BridgeLogger;
}

/** A raw line break in JSON text can only be whitespace between tokens (RFC 8259 §2): a space does as well. */
const LINE_BREAKS = /[\r\n]/g;

export class StdioBackend implements McpBackend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #options: StdioBackendOptions;
  readonly #sessions = new Map<string, StdioSession>();
  readonly #slots: SessionSlots;
  #closing = false;

  constructor(options: StdioBackendOptions) {
    this.#options = options;
    this.name = options.backend.name;
    this.config = options.backend;
    this.#slots = new SessionSlots(options.maxSessions ?? DEFAULT_MAX_BRIDGE_SESSIONS, options.maxSessionsPerUser ?? DEFAULT_MAX_BRIDGE_SESSIONS_PER_USER);
  }

  /** Sessions open or starting (tests, metrics). */
  get sessionCount(): number {
    return this.#slots.size;
  }

  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return tiedTo(this.name, this.#post(body, headers), signal);
  }

  get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return tiedTo(this.name, this.#get(headers), signal);
  }

  async #post(body: string, headers: BackendCallHeaders): Promise<BackendResponse> {
    if (this.#closing) return shuttingDown();
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return jsonAnswer(400, JSON.stringify(errorResponse(null, ErrorCode.ParseError, 'Parse error: Invalid JSON')));
    }
    const batch = Array.isArray(parsed);
    const messages = (batch ? parsed : [parsed]) as unknown[];
    if (messages.length === 0 || !messages.every(isObject)) return jsonAnswer(400, JSON.stringify(errorResponse(null, ErrorCode.InvalidRequest, 'Invalid Request')));
    // One line each (MCP stdio: no embedded newlines); a batch goes as single messages.
    const outgoing: OutgoingMessage[] = batch ? messages.map((message) => ({ message, line: JSON.stringify(message) })) : [{ message: messages[0]!, line: body.replace(LINE_BREAKS, ' ') }];
    if (headers.sessionId !== undefined) {
      const session = this.#sessions.get(headers.sessionId);
      if (!session || session.ended) return sessionNotFound();
      return session.post(outgoing, batch);
    }
    const first = outgoing[0]!;
    const id = first.message.id;
    if (batch || first.message.method !== 'initialize' || (typeof id !== 'string' && typeof id !== 'number')) {
      return jsonAnswer(400, JSON.stringify(errorResponse(null, ErrorCode.InvalidRequest, 'Bad Request: Mcp-Session-Id header is required')));
    }
    return this.#open(first, id, headers);
  }

  async #get(headers: BackendCallHeaders): Promise<BackendResponse> {
    if (this.#closing) return shuttingDown();
    if (headers.sessionId === undefined) return jsonAnswer(400, JSON.stringify(errorResponse(null, ErrorCode.InvalidRequest, 'Bad Request: Mcp-Session-Id header is required')));
    const session = this.#sessions.get(headers.sessionId);
    if (!session || session.ended) return sessionNotFound();
    return session.get();
  }

  async delete(headers: BackendCallHeaders): Promise<BackendResponse> {
    const session = headers.sessionId === undefined ? undefined : this.#sessions.get(headers.sessionId);
    if (!session || session.ended) return sessionNotFound();
    void session.end('closed by the gateway');
    return emptyAnswer(200);
  }

  /** Ends every session (children stopped); the backend takes no new ones. */
  async close(): Promise<void> {
    this.#closing = true;
    await Promise.allSettled([...this.#sessions.values()].map((s) => s.end('the gateway is shutting down')));
  }

  async #open(request: OutgoingMessage, initializeId: RequestId, headers: BackendCallHeaders): Promise<BackendResponse> {
    const { backend, log } = this.#options;
    const slot = this.#slots.take(slotUser(headers.caller?.principal.userKey));
    if (typeof slot === 'string') {
      const refused = capRefusal(backend, this.#slots, slot, initializeId, log);
      return jsonAnswer(refused.status, JSON.stringify(refused.message));
    }
    let session: StdioSession;
    try {
      session = await StdioSession.start({
        backend,
        idleMs: this.#options.idleMs,
        log,
        onEnded: (ended) => {
          this.#sessions.delete(ended.id);
          slot.release();
        },
      });
    } catch (err) {
      slot.release();
      return jsonAnswer(200, JSON.stringify(startFailure(backend, initializeId, err, log)));
    }
    if (this.#closing) {
      void session.end('the gateway is shutting down');
      return shuttingDown();
    }
    this.#sessions.set(session.id, session);
    log.info({ backend: backend.name, transport: backend.transport, pid: session.pid }, 'bridge session started');
    return session.initialize(request, initializeId);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sessionNotFound(): BackendResponse {
  return jsonAnswer(404, JSON.stringify(errorResponse(null, -32001, 'Session not found')));
}

function shuttingDown(): BackendResponse {
  return jsonAnswer(503, JSON.stringify(errorResponse(null, ErrorCode.BackendUnavailable, 'The gateway is shutting down')));
}
