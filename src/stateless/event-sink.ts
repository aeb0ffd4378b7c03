/**
 * One message's bytes in, its SSE event to a 2026-07-28 client out (issue 29): the message is
 * sent as its bytes arrive when it opens as a response with a result
 * (wire/result-type-stream.ts writes `resultType` in where the result closes), so a 1 MB tool
 * result is never held whole; any other message — a notification, a server request, an error,
 * a result whose shaping needs it whole (the cacheable methods' hints, result-shaping.ts) — is
 * held to its end and shaped, as small messages always were. Where a message ends is the
 * caller's to say: the close of its JSON value in JSON lines (json-lines-events.ts), the blank
 * line in SSE (sse-events.ts).
 *
 * A line break inside a streamed message (pretty-printed JSON, or the break between two
 * `data:` lines of a backend's event; a JSON string cannot hold a raw one) begins another
 * `data:` line, which the client joins back with a line break (WHATWG HTML §9.2.6): white space
 * to JSON, so the message it reads is the one sent.
 *
 * A held message is bounded like every message the gateway reads from a backend
 * (backends/backend-messages.ts `MAX_MESSAGE_BYTES`): past the bound `feed` throws
 * `MessageTooLargeError`, which ends the relay, so the client's stream is cut and the backend's
 * connection closed instead of the gateway holding whatever a backend sends. A streamed result
 * holds nothing, so it has no bound.
 */
import { formatSseEvent } from '../wire/sse.js';
import { MessageTooLargeError } from '../wire/json-lines.js';
import { createResultTypeStream } from '../wire/result-type-stream.js';
import { MAX_MESSAGE_BYTES } from '../backends/backend-messages.js';

const DATA = Buffer.from('data: ');
const EVENT_END = Buffer.from('\n\n');
const LINE_BREAK = /\r\n|\r|\n/g;

export interface EventSink {
  /**
   * The next bytes of the message, and what to send for them; `used` is how many were read:
   * fewer only when `toValueEnd` and the message's JSON value closed before the end of `bytes`.
   */
  feed(bytes: Buffer, toValueEnd: boolean): { out: Buffer[]; used: number };
  /** True once the message's JSON value has closed. */
  readonly valueEnded: boolean;
  /** True once the message is being sent as it comes (a response with a result). */
  readonly streaming: boolean;
  /** The message ended: its held event, or the end of the streamed one; nothing for a message with no bytes. */
  finish(): Buffer | undefined;
}

export function createEventSink(shape: (text: string) => string, streamResults: boolean, maxHeldBytes = MAX_MESSAGE_BYTES): EventSink {
  const scan = createResultTypeStream();
  let held: Buffer[] = [];
  let heldBytes = 0;
  let opening: Buffer[] = [];
  let streaming = false;
  return {
    get valueEnded() {
      return scan.ended;
    },
    get streaming() {
      return streaming;
    },
    feed(bytes, toValueEnd) {
      const before = scan.read;
      const said = scan.ended ? [] : scan.feed(bytes);
      const used = toValueEnd ? scan.read - before : bytes.length;
      // Past the value's end (an SSE event's trailing white space) the bytes pass as they are.
      if (used > scan.read - before) said.push(bytes.subarray(scan.read - before, used));
      if (streaming) return { out: said.map(asData), used };
      if (streamResults && scan.verdict === 'response') {
        streaming = true;
        const out = [DATA, ...[...opening, ...said].map(asData)];
        [held, opening] = [[], []];
        return { out, used };
      }
      held.push(bytes.subarray(0, used));
      heldBytes += used;
      if (heldBytes > maxHeldBytes) throw new MessageTooLargeError(maxHeldBytes);
      opening = scan.verdict === 'pending' ? [...opening, ...said] : [];
      return { out: [], used };
    },
    finish() {
      if (streaming) return EVENT_END;
      if (!held.some((b) => b.length)) return undefined;
      return Buffer.from(formatSseEvent(shape(Buffer.concat(held).toString('utf8'))));
    },
  };
}

/** A streamed piece as SSE data: each line break begins another `data:` line. */
function asData(piece: Buffer): Buffer {
  if (piece.indexOf(0x0a) === -1 && piece.indexOf(0x0d) === -1) return piece;
  return Buffer.from(piece.toString('latin1').replace(LINE_BREAK, '\ndata: '), 'latin1');
}
