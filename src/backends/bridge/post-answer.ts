/**
 * The answer to one POST of a stdio session, made from the child's lines as they come, in
 * the form a Streamable HTTP server gives it (MCP 2025-11-25 "Transports" §Sending Messages
 * to the Server: a POST carrying requests is answered with `application/json` or an SSE
 * stream that ends once every request of it is answered):
 *
 * - one request whose response is the first thing the child sends for it: that line alone,
 *   as `application/json` with its length — the usual tool call, answered without SSE framing,
 *   as the gateway would have sent it to its client anyway (mcp/routes.ts);
 * - anything else (progress, a sampling request or a log message first, or a batch): an SSE
 *   stream of the lines, ended after the last response.
 *
 * The answer waits for its first line, so a child that never answers is a timeout here: past
 * the backend's `timeout` without a line for this POST, each request still open is answered
 * with -32011 (errors.ts), as the gateway's HTTP client would have given up on a quiet stream.
 */
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import { formatSseEvent, SSE_RESPONSE_HEADERS } from '../../wire/sse.js';
import type { BackendResponse } from '../backend.js';
import { ExchangeBody } from '../exchange.js';
import { jsonAnswer } from './plain-answers.js';

export interface PostAnswerOptions {
  /** The ids of the POST's requests, in order. */
  requestIds: RequestId[];
  /** The POST was a batch: always SSE, even for one request. */
  batch: boolean;
  /** Headers every answer of this session carries (its Mcp-Session-Id). */
  headers: Record<string, string>;
  timeoutMs: number;
  /** No line came for `timeoutMs`: the session answers the requests still open. */
  onQuiet(answer: PostAnswer): void;
  /** The gateway stopped reading the SSE stream: its requests' later lines go elsewhere. */
  onDropped(answer: PostAnswer): void;
  /** The reader is behind (the child's stdout should pause) or caught up again. */
  onBackpressure(behind: boolean): void;
}

export class PostAnswer {
  readonly response: Promise<BackendResponse>;
  readonly #options: PostAnswerOptions;
  /** Request ids not answered yet, by {@link idKey}. */
  readonly #waiting: Set<string>;
  readonly #timer: NodeJS.Timeout;
  #resolve!: (response: BackendResponse) => void;
  #stream: ExchangeBody | undefined;
  #settled = false;
  #dropped = false;

  constructor(options: PostAnswerOptions) {
    this.#options = options;
    this.#waiting = new Set(options.requestIds.map(idKey));
    this.response = new Promise((resolve) => (this.#resolve = resolve));
    this.#timer = setTimeout(() => options.onQuiet(this), options.timeoutMs).unref();
  }

  /** The requests of this POST still waiting for their response. */
  get waiting(): RequestId[] {
    return this.#options.requestIds.filter((id) => this.#waiting.has(idKey(id)));
  }

  /** True while lines for this POST can still be delivered. */
  get open(): boolean {
    return !this.#dropped && this.#waiting.size > 0;
  }

  /**
   * Delivers one line of the child's; `answers` names the request it is the response to. The
   * answer ends after the last response.
   */
  deliver(line: Buffer | string, answers?: RequestId): void {
    if (!this.open) return;
    this.#timer.refresh();
    const last = answers !== undefined && this.#waiting.delete(idKey(answers)) && this.#waiting.size === 0;
    if (!this.#settled && last && !this.#options.batch && this.#options.requestIds.length === 1) return this.#settleJson(line);
    if (!this.#streamed().push(Buffer.from(formatSseEvent(typeof line === 'string' ? line : line.toString('utf8'))))) this.#options.onBackpressure(true);
    if (last) this.#finish();
  }

  /** A request of this POST will not be answered (cancelled by the client). */
  forget(id: RequestId): void {
    if (!this.#waiting.delete(idKey(id)) || this.#waiting.size > 0) return;
    this.#streamed();
    this.#finish();
  }

  #settleJson(line: Buffer | string): void {
    this.#settled = true;
    clearTimeout(this.#timer);
    this.#resolve(jsonAnswer(200, line, this.#options.headers));
  }

  #streamed(): ExchangeBody {
    if (this.#stream) return this.#stream;
    const stream = (this.#stream = new ExchangeBody(
      () => this.#options.onBackpressure(false),
      () => {
        this.#dropped = true;
        clearTimeout(this.#timer);
        this.#options.onDropped(this);
      },
    ));
    this.#settled = true;
    this.#resolve({ status: 200, headers: { ...this.#options.headers, ...SSE_RESPONSE_HEADERS }, body: stream, contentType: 'text/event-stream' });
    return stream;
  }

  #finish(): void {
    clearTimeout(this.#timer);
    this.#stream?.end();
  }
}

/** Ids are compared by type and value: `1` and `"1"` are different requests. */
export function idKey(id: RequestId): string {
  return typeof id === 'number' ? `n${id}` : `s${id}`;
}
