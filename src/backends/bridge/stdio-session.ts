/**
 * One MCP session with a stdio backend: one child process (stdio-child.ts), serving one
 * gateway session of one user, spoken to directly. The gateway's POSTs become lines on the
 * child's stdin; the child's lines become the answers of those POSTs (post-answer.ts) or
 * events of the session's standalone GET stream. Messages pass through unchanged (SPEC §1:
 * params and results untouched); what is decided here is which answer a line belongs to:
 *
 * - a response, by its id: the ids are the gateway's own, and a session has one client, so
 *   the map from an open request's id to the POST that carries it is all the routing needs;
 * - anything else by open-requests.ts (its progress token, or the one request open), else
 *   the standalone stream; with none open, it is dropped, as a Streamable HTTP server drops
 *   a message it has no stream for;
 * - a backend that negotiates 2024-11-05 has its `initialize` result presented as 2025-03-26,
 *   or is refused when its revision cannot be bridged (legacy-revision.ts).
 *
 * Cancellation (MCP "Cancellation"): a client's `notifications/cancelled` goes to the child,
 * and the request it names will not be answered, so its POST stops waiting for it. A request
 * the child leaves unanswered for the backend's timeout is answered with -32011 and cancelled
 * towards the child, as a client giving up should.
 *
 * The session ends — the child stopped, later requests get 404 (MCP "Session Management":
 * the client must then start a new session) — on DELETE, when the child exits or breaks the
 * transport, when `initialize` is not answered within the backend's timeout, after
 * `bridge.idleTimeout` without traffic or open requests, and when the gateway shuts down.
 * Requests still waiting then are answered with a JSON-RPC error, so the client is told why.
 */
import { randomUUID } from 'node:crypto';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { BackendConfig } from '../../config/schema.js';
import { ErrorCode, errorResponse } from '../../wire/jsonrpc.js';
import { HEADER } from '../../wire/protocol.js';
import { SSE_RESPONSE_HEADERS, formatSseEvent } from '../../wire/sse.js';
import type { BackendResponse } from '../backend.js';
import { BackendError } from '../errors.js';
import { ExchangeBody } from '../exchange.js';
import { presentInitializeResult, refusalMessage } from './legacy-revision.js';
import type { BridgeLogger } from './logger.js';
import { OpenRequests } from './open-requests.js';
import { emptyAnswer, jsonAnswer } from './plain-answers.js';
import { idKey, PostAnswer } from './post-answer.js';
import { StdioChild, type ChildMessage } from './stdio-child.js';

export interface StdioSessionOptions {
  backend: BackendConfig;
  /** `bridge.idleTimeout`: the session ends after this long without a message or request. */
  idleMs: number;
  log: BridgeLogger;
  /** The session ended; called once, before its child is stopped. */
  onEnded(session: StdioSession): void;
}

/** One message of a POST: parsed (for routing) and as the single line the child gets. */
export interface OutgoingMessage {
  message: Record<string, unknown>;
  line: string;
}

/** setTimeout's ceiling (~24.8 days); longer delays would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class StdioSession {
  readonly id = randomUUID();
  readonly #options: StdioSessionOptions;
  readonly #headers: Record<string, string>;
  readonly #open = new OpenRequests();
  /** The POST answer that carries each open request, by idKey. */
  readonly #answers = new Map<string, PostAnswer>();
  readonly #idle: NodeJS.Timeout;
  #child: StdioChild | undefined;
  #standalone: ExchangeBody | undefined;
  #initializeId: RequestId | undefined;
  /** When the gateway last sent a request (an open one younger than the timeout is not idleness). */
  #lastRequestAt = 0;
  #ended = false;
  /** The revision the backend negotiated, and the one the gateway was shown. */
  #protocol: { backend: string; presented: string } | undefined;

  private constructor(options: StdioSessionOptions) {
    this.#options = options;
    this.#headers = { [HEADER.sessionId]: this.id };
    this.#idle = setTimeout(() => {
      // A request the backend may still be working on is not idleness; one older than the
      // backend's timeout was answered with a timeout already.
      if (this.#open.size > 0 && Date.now() - this.#lastRequestAt < options.backend.timeout) this.#idle.refresh();
      else void this.end('idle for longer than bridge.idleTimeout');
    }, Math.min(options.idleMs, MAX_TIMER_MS)).unref();
  }

  /** Starts the child; rejects, with nothing left running, when it cannot be spawned. */
  static async start(options: StdioSessionOptions): Promise<StdioSession> {
    const session = new StdioSession(options);
    try {
      session.#child = await StdioChild.start(options.backend, options.log, {
        message: (received) => session.#fromChild(received),
        exit: (reason) => void session.end(reason, true),
      });
    } catch (err) {
      clearTimeout(session.#idle);
      session.#ended = true;
      throw err;
    }
    return session;
  }

  get ended(): boolean {
    return this.#ended;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /**
   * Sends the `initialize` that opens the session; its answer carries the session id. Not
   * answered within the backend's timeout, the session ends and the answer says so.
   */
  initialize(request: OutgoingMessage, id: RequestId): Promise<BackendResponse> {
    this.#initializeId = id;
    const answer = this.#answerFor([id], false, () => void this.end(`the backend did not answer initialize within ${this.#options.backend.timeout} ms`, true));
    this.#send(request, id, answer);
    return answer.response;
  }

  /** One POST of the session: its messages go to the child; requests are answered as the child answers. */
  post(messages: OutgoingMessage[], batch: boolean): Promise<BackendResponse> {
    this.#idle.refresh();
    const requestIds: RequestId[] = [];
    for (const { message } of messages) if (isRequestId(message.id) && typeof message.method === 'string') requestIds.push(message.id);
    const answer = requestIds.length > 0 ? this.#answerFor(requestIds, batch, (quiet) => this.#timedOut(quiet)) : undefined;
    for (const outgoing of messages) {
      const { message } = outgoing;
      if (message.method === 'notifications/cancelled') this.#cancelled(message.params);
      this.#send(outgoing, isRequestId(message.id) && typeof message.method === 'string' ? message.id : undefined, answer);
    }
    return answer ? answer.response : Promise.resolve(emptyAnswer(202, this.#headers));
  }

  /** Opens the standalone stream (MCP "Listening for Messages from the Server"); one at a time. */
  get(): BackendResponse {
    this.#idle.refresh();
    if (this.#standalone) return jsonAnswer(409, JSON.stringify(errorResponse(null, ErrorCode.InvalidRequest, 'Conflict: only one SSE stream is allowed per session')), this.#headers);
    const stream = (this.#standalone = new ExchangeBody(
      () => this.#child?.resume(),
      () => {
        if (this.#standalone === stream) this.#standalone = undefined;
        this.#child?.resume();
      },
    ));
    return { status: 200, headers: { ...this.#headers, ...SSE_RESPONSE_HEADERS }, body: stream, contentType: 'text/event-stream' };
  }

  /** Ends the session once; `backendSide` marks endings the gateway did not ask for. */
  async end(reason: string, backendSide = false): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#idle);
    const { backend, log } = this.#options;
    this.#options.onEnded(this);
    const waiting = [...new Set(this.#answers.values())];
    this.#answers.clear();
    let unanswered = 0;
    for (const answer of waiting) {
      for (const id of answer.waiting) {
        unanswered++;
        answer.deliver(JSON.stringify(errorResponse(id, ErrorCode.BackendUnavailable, `backend "${backend.name}" session ended: ${reason}`)), id);
      }
    }
    this.#standalone?.end();
    this.#standalone = undefined;
    const details = { backend: backend.name, transport: backend.transport, reason, pid: this.pid, unanswered, protocolVersion: this.#protocol?.backend };
    if (backendSide) {
      const stderr = this.#child?.stderrTail();
      log.warn(stderr ? { ...details, stderr } : details, 'bridge session ended by the backend');
    } else {
      log.info(details, 'bridge session ended');
    }
    await this.#child?.stop();
  }

  #answerFor(requestIds: RequestId[], batch: boolean, onQuiet: (answer: PostAnswer) => void): PostAnswer {
    const answer = new PostAnswer({
      requestIds,
      batch,
      headers: this.#headers,
      timeoutMs: Math.min(this.#options.backend.timeout, MAX_TIMER_MS),
      onQuiet,
      onDropped: (dropped) => this.#dropped(dropped),
      onBackpressure: (behind) => (behind ? this.#child?.pause() : this.#child?.resume()),
    });
    this.#lastRequestAt = Date.now();
    return answer;
  }

  #send(outgoing: OutgoingMessage, requestId: RequestId | undefined, answer: PostAnswer | undefined): void {
    if (requestId !== undefined && answer) {
      this.#answers.set(idKey(requestId), answer);
      this.#open.opened(requestId, outgoing.message.params);
    }
    this.#child!.write(outgoing.line).catch((err: Error) => {
      const { backend, log } = this.#options;
      log.warn({ backend: backend.name, err: err.message }, 'bridge: could not deliver a message to the backend');
      if (requestId === undefined || this.#answers.get(idKey(requestId)) !== answer) return;
      this.#settle(requestId);
      answer!.deliver(JSON.stringify(new BackendError(backend.name, 'unreachable', `backend "${backend.name}" could not be reached: ${err.message}`).rpcError(requestId)), requestId);
    });
  }

  #fromChild({ message, line }: ChildMessage): void {
    this.#idle.refresh();
    if (typeof message.method !== 'string') return this.#response(message, line);
    const related = this.#open.relate(message as JSONRPCMessage);
    const answer = related === undefined ? undefined : this.#answers.get(idKey(related));
    if (answer?.open) return answer.deliver(line);
    this.#toStandalone(line);
  }

  #response(message: Record<string, unknown>, line: Buffer): void {
    const id = message.id;
    if (!isRequestId(id)) return;
    const answer = this.#settle(id);
    if (id === this.#initializeId && this.#protocol === undefined) return this.#initialized(message, line, answer);
    if (answer) answer.deliver(line, id);
    else this.#options.log.debug({ backend: this.#options.backend.name, id }, 'bridge: a response nobody waits for any more; dropped');
  }

  /** The backend's answer to `initialize`: relayed, presented as 2025-03-26, or refused. */
  #initialized(response: Record<string, unknown>, line: Buffer, answer: PostAnswer | undefined): void {
    const { backend, log } = this.#options;
    const id = this.#initializeId!;
    if (!('result' in response)) {
      answer?.deliver(line, id);
      void this.end('initialize was refused by the backend', true);
      return;
    }
    const outcome = presentInitializeResult(response as { result: unknown });
    if (outcome.kind === 'refused') {
      log.warn({ backend: backend.name, transport: backend.transport, protocolVersion: outcome.backendVersion }, 'bridge: backend negotiated a protocol version that cannot be bridged; initialize refused');
      answer?.deliver(JSON.stringify(errorResponse(id, ErrorCode.BackendUnavailable, refusalMessage(backend.name, outcome.backendVersion))), id);
      void this.end('its protocol version cannot be bridged', true);
      return;
    }
    if (outcome.kind === 'supported') {
      this.#protocol = { backend: outcome.version, presented: outcome.version };
      return answer?.deliver(line, id);
    }
    this.#protocol = { backend: outcome.backendVersion, presented: (outcome.message.result as { protocolVersion: string }).protocolVersion };
    log.debug({ backend: backend.name, backendProtocolVersion: this.#protocol.backend, presentedProtocolVersion: this.#protocol.presented }, 'bridge: legacy backend presented to the gateway under a newer revision');
    answer?.deliver(JSON.stringify(outcome.message), id);
  }

  #toStandalone(line: Buffer): void {
    const stream = this.#standalone;
    if (!stream) return this.#options.log.debug({ backend: this.#options.backend.name }, 'bridge: a message for the standalone stream, which is not open; dropped');
    if (!stream.push(Buffer.from(formatSseEvent(line.toString('utf8'))))) this.#child?.pause();
  }

  /** The request is answered (or never will be): no longer open, no longer routed; its answer, if still waiting. */
  #settle(id: RequestId): PostAnswer | undefined {
    const key = idKey(id);
    const answer = this.#answers.get(key);
    this.#answers.delete(key);
    this.#open.closed(id);
    return answer;
  }

  /** A client's cancellation: the request it names will not be answered (MCP "Cancellation"). */
  #cancelled(params: unknown): void {
    const id = (params as { requestId?: unknown } | undefined)?.requestId;
    if (!isRequestId(id)) return;
    this.#settle(id)?.forget(id);
  }

  /** No line for this POST within the backend's timeout: its open requests time out, and the child is told. */
  #timedOut(answer: PostAnswer): void {
    const { backend } = this.#options;
    for (const id of answer.waiting) {
      if (this.#answers.get(idKey(id)) !== answer) continue;
      this.#settle(id);
      const error = new BackendError(backend.name, 'timeout', `backend "${backend.name}" did not answer within ${backend.timeout} ms`);
      answer.deliver(JSON.stringify(error.rpcError(id)), id);
      const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'the gateway stopped waiting (backend timeout)' } };
      this.#child?.write(JSON.stringify(cancel)).catch(() => {});
    }
  }

  /** The gateway stopped reading a POST's stream: what the child still sends for its requests goes to the standalone stream. */
  #dropped(answer: PostAnswer): void {
    for (const [key, held] of this.#answers) if (held === answer) this.#answers.delete(key);
    this.#child?.resume();
  }
}

function isRequestId(id: unknown): id is RequestId {
  return typeof id === 'string' || typeof id === 'number';
}
