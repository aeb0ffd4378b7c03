/**
 * One MCP session through the local bridge: the SDK's Streamable HTTP server transport
 * (facing the gateway) joined, message by message, to a legacy SSE connection (facing the
 * backend). Messages pass through unchanged (SPEC §1: params and
 * results untouched); only the choice of HTTP stream is made here (open-requests.ts), and
 * a backend that negotiates 2024-11-05 has its `initialize` result presented as 2025-03-26
 * (legacy-revision.ts) — or is refused when its revision cannot be bridged.
 *
 * The session ends — backend link closed (the SSE connection closed), the
 * server transport closed so later requests get 404 (MCP "Session Management": the
 * client must then start a new session) — on DELETE, when the SSE connection drops, when `initialize` is not answered within the backend's timeout, after
 * `bridge.idleTimeout` without traffic or open requests, and when the gateway shuts down. Requests still
 * waiting when the backend goes away are answered with a JSON-RPC error, so the client
 * is told why instead of waiting for a timeout.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { BackendConfig } from '../../config/schema.js';
import { ErrorCode } from '../../wire/jsonrpc.js';
import type { BackendLink } from './backend-link.js';
import { presentInitializeResult, refusalMessage } from './legacy-revision.js';
import type { BridgeLogger } from './logger.js';
import { OpenRequests } from './open-requests.js';

export interface BridgeSessionOptions {
  backend: BackendConfig;
  link: BackendLink;
  /** `bridge.idleTimeout`: the session ends after this long without a message or request. */
  idleMs: number;
  /** Largest POST body the server transport accepts (`limits.maxBodyBytes`). */
  maxBodyBytes: number;
  /** The id of the `initialize` request that opens the session. */
  initializeId: RequestId;
  log: BridgeLogger;
  /** The server transport assigned the session id (the initialize POST is being answered). */
  onInitialized(session: BridgeSession): void;
  /** The session ended; called once, before its transports are closed. */
  onEnded(session: BridgeSession): void;
}

/** setTimeout's ceiling (~24.8 days); longer delays would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class BridgeSession {
  readonly #options: BridgeSessionOptions;
  readonly #server: StreamableHTTPServerTransport;
  readonly #link: BackendLink;
  readonly #open = new OpenRequests();
  readonly #idle: NodeJS.Timeout;
  #initTimer: NodeJS.Timeout | undefined;
  /** When the gateway last sent a request (an open one younger than the timeout is not idleness). */
  #lastRequestAt = 0;
  /** Sends to the server transport, in the order the backend produced them. */
  #sending: Promise<void> = Promise.resolve();
  #ended = false;
  /** The revision the backend negotiated, and the one the gateway was shown (they differ for a bridged 2024-11-05 backend). */
  #protocol: { backend: string; presented: string } | undefined;

  constructor(options: BridgeSessionOptions) {
    this.#options = options;
    this.#link = options.link;
    this.#server = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      maxRequestBodySize: options.maxBodyBytes,
      onsessioninitialized: () => options.onInitialized(this),
    });
    this.#server.onmessage = (message) => this.#fromGateway(message);
    this.#server.onclose = () => void this.end('closed by the gateway');
    this.#server.onerror = (error) => options.log.debug({ backend: options.backend.name, err: error.message }, 'bridge: request refused');
    const transport = this.#link.transport;
    transport.onmessage = (message) => this.#fromBackend(message);
    transport.onclose = () => void this.end('the backend closed the connection', true);
    transport.onerror = (error) => {
      if (this.#link.isConnectionLoss(error)) void this.end('the connection to the backend was lost', true);
      else options.log.debug({ backend: options.backend.name, err: error.message }, 'bridge: backend transport error');
    };
    this.#idle = setTimeout(() => {
      // A request the backend may still be working on is not idleness; one older than the
      // backend's timeout was given up by the gateway already.
      if (this.#open.size > 0 && Date.now() - this.#lastRequestAt < options.backend.timeout) this.#idle.refresh();
      else void this.end('idle for longer than bridge.idleTimeout');
    }, Math.min(options.idleMs, MAX_TIMER_MS)).unref();
    this.#initTimer = setTimeout(() => {
      if (this.#open.has(options.initializeId)) void this.end(`the backend did not answer initialize within ${options.backend.timeout} ms`, true);
    }, Math.min(options.backend.timeout, MAX_TIMER_MS)).unref();
  }

  /** The Mcp-Session-Id given to the gateway (set once `initialize` is accepted). */
  get id(): string | undefined {
    return this.#server.sessionId;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The protocol revision the backend negotiated (undefined until it answered initialize). */
  get backendProtocolVersion(): string | undefined {
    return this.#protocol?.backend;
  }

  /** The revision the gateway was shown: the backend's own, or 2025-03-26 for a bridged 2024-11-05 backend. */
  get presentedProtocolVersion(): string | undefined {
    return this.#protocol?.presented;
  }

  /** Serves one HTTP request of this session (POST, GET or DELETE). */
  async handle(req: IncomingMessage, res: ServerResponse, parsedBody?: unknown): Promise<void> {
    this.#idle.refresh();
    await this.#server.handleRequest(req, res, parsedBody);
  }

  #fromGateway(message: JSONRPCMessage): void {
    this.#idle.refresh();
    const request = 'method' in message && 'id' in message ? (message as { id: RequestId; params?: unknown }) : undefined;
    if (request) {
      this.#open.opened(request.id, request.params);
      this.#lastRequestAt = Date.now();
    }
    // A cancelled request will not be answered (MCP "Cancellation").
    if ('method' in message && message.method === 'notifications/cancelled' && !('id' in message)) {
      const cancelled = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof cancelled === 'string' || typeof cancelled === 'number') this.#open.closed(cancelled);
    }
    this.#link.transport.send(message).catch((err: Error) => {
      this.#options.log.warn({ backend: this.#options.backend.name, err: err.message }, 'bridge: could not deliver a message to the backend');
      if (request && this.#open.has(request.id)) {
        this.#open.closed(request.id);
        this.#toGateway(errorFor(request.id, `backend "${this.#options.backend.name}" could not be reached: ${err.message}`));
      }
    });
  }

  #fromBackend(message: JSONRPCMessage): void {
    this.#idle.refresh();
    const relatedRequestId = this.#open.relate(message);
    if ('id' in message && !('method' in message)) {
      this.#open.closed(message.id as RequestId);
      if (message.id === this.#options.initializeId && this.#protocol === undefined && !this.#ended) {
        clearTimeout(this.#initTimer);
        if ('result' in message) return this.#initialized(message as JSONRPCMessage & { result: unknown });
      }
    }
    this.#toGateway(message, relatedRequestId);
  }

  /** The backend's answer to `initialize`: relayed, presented as 2025-03-26, or refused. */
  #initialized(response: JSONRPCMessage & { result: unknown }): void {
    const { backend, log, initializeId } = this.#options;
    const outcome = presentInitializeResult(response);
    if (outcome.kind === 'refused') {
      const text = refusalMessage(backend.name, outcome.backendVersion);
      log.warn({ backend: backend.name, transport: backend.transport, protocolVersion: outcome.backendVersion }, 'bridge: backend negotiated a protocol version that cannot be bridged; initialize refused');
      this.#toGateway(errorFor(initializeId, text), initializeId);
      void this.end('its protocol version cannot be bridged', true);
      return;
    }
    if (outcome.kind === 'supported') {
      this.#protocol = { backend: outcome.version, presented: outcome.version };
      return this.#toGateway(response, initializeId);
    }
    this.#protocol = { backend: outcome.backendVersion, presented: (outcome.message.result as { protocolVersion: string }).protocolVersion };
    log.debug({ backend: backend.name, backendProtocolVersion: this.#protocol.backend, presentedProtocolVersion: this.#protocol.presented }, 'bridge: legacy backend presented to the gateway under a newer revision');
    this.#toGateway(outcome.message as JSONRPCMessage, initializeId);
  }

  /**
   * Hands a message to the server transport. A related stream that is already gone (the
   * gateway gave up on that request) falls back to the standalone stream for requests and
   * notifications; an undeliverable response is dropped.
   */
  #toGateway(message: JSONRPCMessage, relatedRequestId?: RequestId): void {
    const isResponse = 'id' in message && !('method' in message);
    this.#sending = this.#sending
      .then(() => this.#server.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId }))
      .catch(async () => {
        if (!isResponse && relatedRequestId !== undefined) await this.#server.send(message);
      })
      .catch((err: Error) => this.#options.log.debug({ backend: this.#options.backend.name, err: err.message }, 'bridge: message for the gateway dropped'));
  }

  /** Ends the session once; `backendSide` marks endings the gateway did not ask for. */
  async end(reason: string, backendSide = false): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#idle);
    clearTimeout(this.#initTimer);
    const { backend, log } = this.#options;
    this.#options.onEnded(this);
    const waiting = this.#open.ids();
    for (const id of waiting) {
      this.#open.closed(id);
      this.#toGateway(errorFor(id, `backend "${backend.name}" session ended: ${reason}`));
    }
    const details = { backend: backend.name, transport: backend.transport, reason, unanswered: waiting.length, protocolVersion: this.#protocol?.backend };
    if (backendSide) {
      log.warn(details, 'bridge session ended by the backend');
    } else {
      log.info(details, 'bridge session ended');
    }
    await this.#sending;
    await this.#server.close().catch(() => {});
    await this.#link.transport.close().catch(() => {});
  }
}

function errorFor(id: RequestId, message: string): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: ErrorCode.BackendUnavailable, message } };
}
