/**
 * One WebSocket connection (`/ws/mcp[/{backend}]`, subprotocol `mcp`) bridged to the
 * gateway's own Streamable HTTP endpoint (`/mcp[/{backend}]`) over loopback.
 *
 * Why a bridge and not a second implementation of the MCP layer: every message *is* an
 * HTTP request to that endpoint, sent with the client's own Authorization header and the
 * Host of its upgrade request, so every rule of the HTTP path applies unchanged and cannot
 * drift: token verification and its cache, access policy, rate limits, sessions bound to
 * the user and kept in Redis (any replica serves them), URL-mode elicitation, SSE replay,
 * aggregation for `/mcp`, metrics and logs. The token goes back to this same gateway, as the
 * same user; it never reaches a backend (SPEC §1, no token passthrough). The cost is one
 * loopback HTTP exchange per message, on kept-alive connections.
 *
 * Mapping (MCP 2025-11-25 "Transports"; the SDK's WebSocketClientTransport):
 *  - each text frame carries one JSON-RPC message, POSTed alone; each message of the answer
 *    (JSON or SSE) becomes one text frame. A frame that is binary, not JSON or not a
 *    JSON-RPC message gets an error frame (-32600/-32700) and the connection stays usable;
 *  - `initialize` creates the session; its Mcp-Session-Id and negotiated revision
 *    (MCP-Protocol-Version) go on every later request. One session per connection;
 *  - once the client's `notifications/initialized` went through, the session's GET stream
 *    is opened and its messages (server notifications and requests) become frames;
 *  - a stream the gateway ends with `retry` (GET, or a POST answer not yet complete) is
 *    resumed with Last-Event-ID, a bounded number of times in a row;
 *  - HTTP refusals become error frames or close codes (error-frames.ts);
 *  - closing the socket aborts everything in flight and DELETEs the session.
 *
 * Ordering: frames are handled in arrival order. `initialize` is awaited before the next
 * frame (later messages need its session id). Notifications and responses are awaited
 * until the gateway accepted them (202), so `initialized` precedes the first request and a
 * sampling answer precedes what the client sends after it. A request's POST is started and
 * not awaited: a long tools/call never holds up later messages (nor the
 * `notifications/cancelled` that ends it); its answer streams back whenever it comes.
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import { FAILURE_RPC_CODE } from '../backends/errors.js';
import { ErrorCode, errorResponse, idOfJsonText, InvalidMessageError, isBatchText, isRequest, parseMessages, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER } from '../wire/protocol.js';
import { headerValue } from '../wire/headers.js';
import { standardHeadersOf } from '../wire/revision-2026.js';
import { isEventStream, readEventStream, readJsonMessages } from './answer-reader.js';
import { closeFor, CloseCode, closeReason, errorFrameFor, type CloseInstruction, type HttpRefusal } from './error-frames.js';
import type { Loopback, LoopbackResponse } from './loopback.js';

/** Most bytes of frames a connection may have queued for a client that does not read. */
export const MAX_UNREAD_BYTES = 16 * 1024 * 1024;

export interface BridgeOptions {
  socket: WebSocket;
  loopback: Loopback;
  /** The HTTP endpoint this connection speaks to: `/mcp` or `/mcp/<backend>`. */
  path: string;
  /** Sent on every loopback request: the client's `authorization` and `host`, and its token (bridged-clients.ts). */
  headers: Record<string, string>;
  log: FastifyBaseLogger;
}

/** Reconnections of a stream in a row that may fail before the bridge gives up on it. */
const MAX_RECONNECTS = 5;
const DEFAULT_RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;
const DELETE_TIMEOUT_MS = 5_000;
/** How long a closing handshake may take at shutdown before the socket is cut. */
const SHUTDOWN_CLOSE_MS = 2_000;

type StreamOutcome = 'done' | 'ended' | 'failed';

export class WebSocketBridge {
  readonly #o: BridgeOptions;
  /**
   * Aborts every loopback request of this connection. Each request in flight holds one
   * listener on its signal until its answer's body closes (undici removes it then), so their
   * number is the connection's concurrency, which has no bound of its own: Node's warning at
   * eleven would report calls at once as a leak (the constructor lifts it).
   */
  readonly #abort = new AbortController();
  #sessionId: string | undefined;
  #protocolVersion: string | undefined;
  /** Frames wait here for the ones before them (see Ordering above). */
  #line: Promise<void> = Promise.resolve();
  #standaloneOpened = false;
  /** False once the session is known to be gone (or unusable): nothing to DELETE. */
  #deleteOnEnd = true;
  #ending: Promise<void> | undefined;

  constructor(options: BridgeOptions) {
    this.#o = options;
    setMaxListeners(0, this.#abort.signal);
    options.socket.on('message', (data, isBinary) => this.#onFrame(data, isBinary));
    options.socket.once('close', () => void this.end());
  }

  /**
   * Ends the connection's work: aborts what is in flight and ends the session (DELETE).
   * Runs once, whether the client closed the socket or the bridge did.
   */
  end(): Promise<void> {
    return (this.#ending ??= this.#end());
  }

  /** Server shutdown: 1001 to the client; the session is left to expire (the endpoint refuses requests while closing). */
  async shutdown(): Promise<void> {
    this.#deleteOnEnd = false;
    this.#close({ code: CloseCode.goingAway, reason: 'server shutting down; reconnect' });
    const { socket } = this.#o;
    if (socket.readyState !== socket.CLOSED) setTimeout(() => socket.terminate(), SHUTDOWN_CLOSE_MS).unref();
    await this.end();
  }

  #onFrame(data: RawData, isBinary: boolean): void {
    if (this.#abort.signal.aborted) return;
    if (isBinary) {
      this.#send(errorResponse(null, ErrorCode.InvalidRequest, 'Invalid Request: binary frames are not supported; send each JSON-RPC message as a text frame'));
      return;
    }
    const text = frameText(data);
    if (isBatchText(text)) {
      this.#send(errorResponse(null, ErrorCode.InvalidRequest, 'Invalid Request: one JSON-RPC message per frame; batches are not supported over WebSocket'));
      return;
    }
    let message: JsonRpcMessage;
    try {
      message = parseMessages(text, false)[0]!;
    } catch (err) {
      const invalid = err instanceof InvalidMessageError ? err : new InvalidMessageError(ErrorCode.InvalidRequest, 'Invalid Request');
      this.#send(errorResponse(invalid.code === ErrorCode.ParseError ? null : idOfJsonText(text), invalid.code, invalid.message));
      return;
    }
    this.#line = this.#line
      .then(() => this.#dispatch(message, text))
      .catch((err: unknown) => this.#o.log.error({ err }, 'WebSocket bridge failed on a frame'));
  }

  async #dispatch(message: JsonRpcMessage, text: string): Promise<void> {
    if (this.#abort.signal.aborted) return;
    if (isRequest(message) && message.method === 'initialize') {
      if (this.#sessionId) {
        this.#send(errorResponse(message.id, ErrorCode.InvalidRequest, 'Invalid Request: this connection already has an MCP session; open another WebSocket for a new one'));
        return;
      }
      await this.#post(message, text);
      return;
    }
    if (isRequest(message)) {
      this.#post(message, text).catch((err: unknown) => this.#o.log.error({ err }, 'WebSocket bridge failed on a request'));
      return;
    }
    const accepted = await this.#post(message, text);
    if (accepted && message.method === 'notifications/initialized' && this.#sessionId && !this.#standaloneOpened) {
      this.#standaloneOpened = true;
      void this.#followStandalone();
    }
  }

  /** POSTs one message and relays its answer; true when the gateway accepted it. */
  async #post(message: JsonRpcMessage, text: string): Promise<boolean> {
    const id = isRequest(message) ? message.id : undefined;
    const initialize = message.method === 'initialize';
    let res: LoopbackResponse;
    try {
      // A 2026-07-28 message carries no session; its standard headers come from its own body.
      const stateless = standardHeadersOf(message);
      res = await this.#request('POST', { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...stateless }, text, undefined, stateless !== undefined);
    } catch (err) {
      this.#loopbackFailed(err, id);
      return false;
    }
    if (res.statusCode === 202) {
      await res.body.dump().catch(() => {});
      return true;
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await this.#refused(res, id);
      return false;
    }
    if (initialize) {
      const sessionId = headerValue(res.headers[HEADER.sessionId]);
      if (sessionId) this.#sessionId = sessionId;
    }
    const onMessage = (data: string) => {
      if (initialize) this.#noteNegotiatedVersion(data, id);
      this.#sendText(data);
    };
    if (!isEventStream(res)) {
      let texts: string[];
      try {
        texts = await readJsonMessages(res);
      } catch (err) {
        if (!this.#abort.signal.aborted && id !== undefined) this.#send(errorResponse(id, ErrorCode.InternalError, `Internal error: unreadable answer from the gateway (${(err as Error).message})`));
        return false;
      }
      texts.forEach(onMessage);
      return true;
    }
    const outcome = await this.#followStream(res, id, onMessage);
    if (outcome !== 'done' && id !== undefined) {
      this.#send(errorResponse(id, FAILURE_RPC_CODE.stream_broken, 'The answer stream ended before the response arrived', { reason: 'stream_broken' }));
    }
    return true;
  }

  /** The session's standalone GET stream, for as long as the connection lives. */
  async #followStandalone(): Promise<void> {
    const outcome = await this.#followStream(undefined, undefined, (data) => this.#sendText(data));
    if (outcome === 'failed') this.#close({ code: CloseCode.internalError, reason: 'lost the session stream from the server; reconnect' });
    else if (outcome === 'ended') this.#o.log.info('the gateway ended the session stream without retry; no longer following it');
  }

  /**
   * Relays an SSE stream, and resumes it with Last-Event-ID when it ends with `retry` (or
   * breaks) while still needed: for a POST answer until the response to `requestId` came,
   * for the GET stream (`first` undefined: opened here) until the connection closes.
   * 'done': nothing more is owed; 'ended': ended for good without the response; 'failed':
   * reconnecting failed MAX_RECONNECTS times in a row.
   */
  async #followStream(first: LoopbackResponse | undefined, requestId: JsonRpcId | undefined, onMessage: (data: string) => void): Promise<StreamOutcome> {
    let res = first;
    let lastEventId: string | undefined;
    let retryMs = DEFAULT_RETRY_MS;
    let failures = 0;
    let answered = false;
    const owed = () => !this.#abort.signal.aborted && (requestId === undefined || !answered);
    for (;;) {
      if (!res) {
        res = await this.#request('GET', { accept: 'text/event-stream', ...(lastEventId ? { [HEADER.lastEventId]: lastEventId } : {}) }).catch((err: Error) => {
          if (!this.#abort.signal.aborted) this.#o.log.warn({ err: err.message }, 'could not reopen an SSE stream over loopback');
          return undefined;
        });
        if (this.#abort.signal.aborted) return 'done';
        if (res && (res.statusCode !== 200 || !isEventStream(res))) {
          const refusal = await refusalOf(res);
          res = undefined;
          const close = closeFor(refusal, true);
          if (close) {
            this.#close(close, false);
            return 'done';
          }
          // 409: another connection holds this session's GET stream.
          if (refusal.status === 409 && requestId === undefined) return 'ended';
          this.#o.log.warn({ status: refusal.status }, 'the gateway refused to reopen an SSE stream');
        }
      }
      if (res) {
        const end = await readEventStream(res, (data) => {
          if (requestId !== undefined && !answered && answersRequest(data, requestId)) answered = true;
          onMessage(data);
        });
        res = undefined;
        if (end.lastEventId) lastEventId = end.lastEventId;
        if (end.retryMs !== undefined) retryMs = end.retryMs;
        if (!owed()) return 'done';
        if (!end.endedWithRetry && !end.error) return 'ended';
        // A POST answer without event ids cannot be resumed; a GET stream can be reopened.
        if (requestId !== undefined && !lastEventId) return 'ended';
        failures = end.error ? failures + 1 : 0;
      } else {
        failures++;
      }
      if (failures > MAX_RECONNECTS) return 'failed';
      const delay = Math.min(retryMs * 2 ** Math.max(0, failures - 1), MAX_RETRY_MS);
      try {
        await sleep(delay, undefined, { signal: this.#abort.signal });
      } catch {
        return 'done';
      }
    }
  }

  /** An HTTP refusal: an error frame for the request, and a close when the connection cannot go on. */
  async #refused(res: LoopbackResponse, id: JsonRpcId | undefined): Promise<void> {
    const refusal = await refusalOf(res);
    if (id !== undefined) this.#send(errorFrameFor(id, refusal));
    else this.#o.log.info({ status: refusal.status }, 'the gateway refused a notification or response sent over WebSocket');
    const close = closeFor(refusal, this.#sessionId !== undefined);
    if (close) this.#close(close, false);
  }

  #loopbackFailed(err: unknown, id: JsonRpcId | undefined): void {
    if (this.#abort.signal.aborted) return;
    this.#o.log.warn({ err: (err as Error).message }, 'WebSocket bridge: loopback request failed');
    if (id !== undefined) this.#send(errorResponse(id, ErrorCode.InternalError, 'Internal error: the gateway could not process the message'));
  }

  /** Takes the negotiated revision from the initialize result, for MCP-Protocol-Version. */
  #noteNegotiatedVersion(data: string, id: JsonRpcId | undefined): void {
    try {
      const m = JSON.parse(data) as JsonRpcMessage;
      const version = (m.result as { protocolVersion?: unknown } | undefined)?.protocolVersion;
      if (m.id === id && typeof version === 'string') this.#protocolVersion = version;
    } catch {
      // not this message
    }
  }

  #request(method: 'GET' | 'POST' | 'DELETE', extra: Record<string, string>, body?: string, signal = this.#abort.signal, sessionless = false): Promise<LoopbackResponse> {
    const headers: Record<string, string> = { ...this.#o.headers, ...extra };
    if (!sessionless && this.#sessionId) headers[HEADER.sessionId] = this.#sessionId;
    if (!sessionless && this.#protocolVersion) headers[HEADER.protocolVersion] = this.#protocolVersion;
    return this.#o.loopback.request(method, this.#o.path, headers, body, signal);
  }

  #send(message: JsonRpcMessage): void {
    this.#sendText(JSON.stringify(message));
  }

  #sendText(text: string): void {
    const { socket } = this.#o;
    if (socket.readyState !== socket.OPEN) return;
    // A client that does not read must not make the gateway hold its messages without
    // bound: past the limit the connection is closed (it can reconnect and initialize again).
    if (socket.bufferedAmount + text.length > MAX_UNREAD_BYTES) {
      this.#close({ code: CloseCode.policyViolation, reason: 'client not reading: too many unsent messages; reconnect' });
      return;
    }
    socket.send(text);
  }

  /** Closes the socket; `deleteSession` false when the session is gone or the token refused. */
  #close(instruction: CloseInstruction, deleteSession = true): void {
    if (!deleteSession) this.#deleteOnEnd = false;
    const { socket } = this.#o;
    if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) {
      this.#o.log.info({ code: instruction.code, reason: instruction.reason }, 'closing WebSocket connection');
      socket.close(instruction.code, closeReason(instruction.reason));
    }
    void this.end();
  }

  async #end(): Promise<void> {
    this.#abort.abort();
    const sessionId = this.#sessionId;
    if (!sessionId || !this.#deleteOnEnd) return;
    try {
      const res = await this.#request('DELETE', {}, undefined, AbortSignal.timeout(DELETE_TIMEOUT_MS));
      await res.body.dump().catch(() => {});
      if (res.statusCode >= 300 && res.statusCode !== 404) this.#o.log.warn({ status: res.statusCode }, 'could not end the session of a closed WebSocket');
      else this.#o.log.debug('session of a closed WebSocket ended');
    } catch (err) {
      this.#o.log.warn({ err: (err as Error).message }, 'could not end the session of a closed WebSocket');
    }
  }
}

function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

function answersRequest(data: string, id: JsonRpcId): boolean {
  try {
    const m = JSON.parse(data) as JsonRpcMessage;
    return m.method === undefined && m.id === id && ('result' in m || 'error' in m);
  } catch {
    return false;
  }
}

async function refusalOf(res: LoopbackResponse): Promise<HttpRefusal> {
  const body = await res.body.text().catch(() => '');
  return { status: res.statusCode, body, retryAfter: headerValue(res.headers['retry-after']) };
}
