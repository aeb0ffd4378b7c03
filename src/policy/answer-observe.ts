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
 * - text/event-stream: each event's data is read as it passes, the events relayed as they come;
 *   dropping the body reaches the backend's at once (backends/body.ts `derivedBody`);
 * - anything else passes untouched.
 *
 * A message is read by outcome-scan.ts (id, `method`, `error.code` and `error.message`,
 * `result.isError`) without a parse, unless the observer asks for `whole` messages (the
 * telemetry's opt-in `recordContent` puts the tool's result on the span) or the text is a batch.
 */
import type { BackendResponse } from '../backends/backend.js';
import { derivedBody, tappedBody, type BackendBody } from '../backends/body.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { transformSse } from '../wire/sse.js';
import { scanResponse } from './outcome-scan.js';

export interface AnswerObserver {
  /** Sees each message of the answer (a scanned one holds only what outcome-scan.ts reads). */
  observe(message: JsonRpcMessage): void;
  /** Each message parsed whole, not scanned. */
  whole?: boolean;
  /** Called once the answer has been read to its end, or dropped. */
  settled?: () => void;
}

/** The observers of an answer already watched, kept on the response this module made (not enumerable: a copy of it does not carry them). */
const WATCHERS = Symbol('answer watchers');
type Watched = BackendResponse & { [WATCHERS]?: AnswerObserver[] };

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
    return observer.settled ? { ...res, body: endingWith(res.body, res.body, observer.settled) } : res;
  }
  const joined = (res as Watched)[WATCHERS];
  // A watch that parses whole messages serves an observer that scans; not the other way.
  if (joined && (joined[0]!.whole || !observer.whole)) {
    joined.push(observer);
    return res;
  }
  const watchers = [observer];
  const all: AnswerObserver = {
    observe: (m) => {
      for (const w of watchers) w.observe(m);
    },
    whole: observer.whole,
    settled: () => {
      for (const w of watchers) w.settled?.();
    },
  };
  const watched = watchedAnswer(res, all);
  Object.defineProperty(watched, WATCHERS, { value: watchers, enumerable: false });
  return watched;
}

/** JSON tapped, SSE events read as they pass (the content type is one of the two). */
function watchedAnswer(res: BackendResponse, observer: AnswerObserver): BackendResponse {
  const { settled } = observer;
  const read = (text: string) => observeText(text, observer);
  if (res.contentType === 'application/json') return { ...res, body: tappedBody(res.body, (bytes) => read(bytes.toString('utf8')), settled) };
  if (res.contentType === 'text/event-stream') {
    const headers = { ...res.headers };
    delete headers['content-length'];
    const events = transformSse(res.body, (data, id) => {
      if (data.trim()) read(data);
      return { data, id };
    });
    return { ...res, headers, body: endingWith(res.body, events, settled) };
  }
  return res;
}

/** Tells `observe` of each message in `text`: scanned when it is one object (unless `whole`), parsed otherwise. */
function observeText(text: string, { observe, whole }: AnswerObserver): void {
  const scanned = whole ? undefined : scanResponse(text);
  if (scanned) return observe(scanned as JsonRpcMessage);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return; // not JSON: no outcome to record, as when the answer is edited
  }
  for (const m of Array.isArray(parsed) ? parsed : [parsed]) if (m && typeof m === 'object' && !Array.isArray(m)) observe(m as JsonRpcMessage);
}

/**
 * `chunks` of `source` as a body, calling `done` (idempotent) once they have been read to their
 * end or dropped — dropped at once: `destroy()` reaches `source` without waiting for its next chunk.
 */
function endingWith(source: BackendBody, chunks: AsyncIterable<Buffer>, done: (() => void) | undefined): BackendBody {
  const ending = async function* () {
    try {
      yield* chunks;
    } finally {
      done?.();
    }
  };
  return derivedBody(source, done ? ending() : chunks, done);
}
