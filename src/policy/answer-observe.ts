/**
 * A backend's answer watched as it passes, unchanged: each response message it carries is told
 * to an observer, and the answer goes on as the backend sent it. One helper for the two that
 * only watch — the audit trail (answer-edit.ts, when nothing is to be edited) and the
 * telemetry's CLIENT spans (telemetry/client-span-backend.ts) — so both pay the same, least,
 * price (issue 30 "Cost"):
 *
 * - application/json: the bytes are tapped (backends/body.ts `tappedBody`), so the relay keeps
 *   the backend's length and its one-write path (backends/held-answer.ts), and read once they
 *   have all passed;
 * - text/event-stream: the bytes pass as the backend sent them, its length kept, and each
 *   event's data is read as it passes — from the whole answer when the relay reads it whole
 *   (the one-event answer: one read, its events found by `indexOf`), else chunk by chunk;
 *   dropping the body reaches the backend's at once (backends/sse-tapped-body.ts);
 * - anything else passes untouched.
 *
 * A message is read by outcome-scan.ts (id, `method`, `error.code` and `error.message`,
 * `result.isError`) without a parse, unless the observer asks for `whole` messages (the
 * telemetry's opt-in `recordContent` puts the tool's result on the span) or the text is a batch.
 */
import type { BackendResponse } from '../backends/backend.js';
import { tappedBody, watchedBody, withBody, type BackendBody } from '../backends/body.js';
import { sseTappedBody } from '../backends/sse-tapped-body.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { bytesMayHoldError, scanResponse, textMayHoldError } from './outcome-scan.js';

export interface AnswerObserver {
  /** Sees each message of the answer (a scanned one holds only what outcome-scan.ts reads). */
  observe(message: JsonRpcMessage): void;
  /** Each message parsed whole, not scanned. */
  whole?: boolean;
  /**
   * Only a response that carries an error changes what this observer keeps: one without ends
   * its request as `settled` would (the CLIENT spans, whose duration histograms are what metrics
   * only records). Then an answer read whole whose text cannot hold an error
   * (outcome-scan.ts `bytesMayHoldError`) is not scanned for it; `settled` follows at once.
   */
  errorsOnly?: boolean;
  /** Called once the answer has been read to its end, or dropped. */
  settled?: () => void;
}

/**
 * A response this module made: the backend's, its body tapped, and the watch on it. The watch
 * is a private field, so a copy a face makes of the response (`{ ...res }`) is a plain object
 * that carries none, and is watched anew. (A symbol defined on each response turned it into a
 * dictionary, a WeakMap entry cost a microsecond of the collector's ephemeron work: issue 44
 * part 1.)
 */
class WatchedResponse implements BackendResponse {
  readonly status: number;
  readonly headers: BackendResponse['headers'];
  readonly contentType: string;
  readonly body: BackendBody;
  /** Only when the response has it (declared, so no field is defined otherwise). */
  declare readonly refused?: boolean;
  readonly #watch: Watch;

  constructor(res: BackendResponse, watch: Watch) {
    this.status = res.status;
    this.headers = res.headers;
    this.contentType = res.contentType;
    this.body = res.contentType === 'application/json' ? tappedBody(res.body, watch) : sseTappedBody(res.body, watch);
    if (res.refused !== undefined) this.refused = res.refused;
    this.#watch = watch;
  }

  /** The watch of a response made here, unchanged; undefined for any other. */
  static watchOf(res: BackendResponse): Watch | undefined {
    return #watch in res ? (res as WatchedResponse).#watch : undefined;
  }
}

/**
 * `res` with its messages told to `observer` as they pass. When `res` is, unchanged, an answer
 * this module already watches (the CLIENT span's, inside the audit's: issue 44 "read each
 * answer once for everything that needs it"), the observer joins that watch — one tap, one
 * scan of each message, told to both in turn — instead of wrapping the body again. An answer
 * a face between them rewrote is a new object, and is watched anew.
 */
export function observedAnswer(res: BackendResponse, observer: AnswerObserver): BackendResponse {
  if (res.contentType !== 'application/json' && res.contentType !== 'text/event-stream') {
    // No messages to read: only the end, when asked.
    if (!observer.settled) return res;
    const settled = () => observer.settled!();
    return withBody(res, watchedBody(res.body, settled, settled));
  }
  const joined = WatchedResponse.watchOf(res);
  // A watch that parses whole messages serves an observer that scans; not the other way.
  if (joined && (joined.whole || !observer.whole)) {
    joined.add(observer);
    return res;
  }
  return new WatchedResponse(res, new Watch(observer));
}

/**
 * One answer's watchers, told each message in turn: what the tapped body calls back (no
 * closure made per answer — the methods are the class's).
 */
class Watch {
  readonly watchers: AnswerObserver[];
  readonly whole: boolean;
  /** Whether every watcher acts only on errors ({@link AnswerObserver.errorsOnly}). */
  #errorsOnly: boolean;

  constructor(first: AnswerObserver) {
    this.watchers = [first];
    this.whole = first.whole === true;
    this.#errorsOnly = first.errorsOnly === true;
  }

  add(observer: AnswerObserver): void {
    this.watchers.push(observer);
    if (observer.errorsOnly !== true) this.#errorsOnly = false;
  }

  /** The whole JSON answer (tappedBody): scanned as bytes, never decoded whole unless parsed. */
  onBytes(bytes: Buffer): void {
    if (this.#errorsOnly && !bytesMayHoldError(bytes)) return;
    observeMessages(bytes, undefined, this.whole, this);
  }

  /** One SSE event's data; `wholeAnswer`: the answer was read whole, so it is over once its events are told. */
  onText(text: string, wholeAnswer: boolean): void {
    if (wholeAnswer && this.#errorsOnly && !textMayHoldError(text)) return;
    observeMessages(Buffer.from(text, 'utf8'), text, this.whole, this);
  }

  observe(m: JsonRpcMessage): void {
    for (const w of this.watchers) w.observe(m);
  }

  settled(): void {
    for (const w of this.watchers) w.settled?.();
  }
}

/**
 * Tells `watch` of each message in `bytes` (UTF-8; `text` when the caller holds it decoded):
 * scanned when it is one object (unless `whole`), parsed otherwise.
 */
function observeMessages(bytes: Buffer, text: string | undefined, whole: boolean, watch: Watch): void {
  const scanned = whole ? undefined : scanResponse(bytes);
  if (scanned) return watch.observe(scanned as JsonRpcMessage);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text ?? bytes.toString('utf8'));
  } catch {
    return; // not JSON: no outcome to record, as when the answer is edited
  }
  for (const m of Array.isArray(parsed) ? parsed : [parsed]) if (m && typeof m === 'object' && !Array.isArray(m)) watch.observe(m as JsonRpcMessage);
}
