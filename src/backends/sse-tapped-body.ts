/**
 * A backend's SSE body passed on as the backend sent it, each event's data told to a watcher
 * as it passes (issue 44 part 1: the audit's and the CLIENT span's outcome of an SSE answer).
 *
 * Before, the watch rewrote the stream — every event parsed and written out again through an
 * async generator, the length dropped — so the one-event answer SDK servers send for a call
 * lost its one-read path: the relay (mcp/routes.ts relaySseAnswer, backends/held-answer.ts)
 * iterated the rewritten events, then parsed them once more. Here nothing is rewritten:
 *
 * - `bytes()` / `text()` are the source's own (one read of the whole answer, its length kept);
 *   the events are read from those bytes once they are all there — for the usual one-event
 *   body by `indexOf`, without the parser (wire/sse.ts eventDataOf);
 * - iterated, each chunk goes on as it came, after the parser has been fed it, so an event is
 *   told before the chunk that completes it reaches the reader (progress while a call runs);
 * - `dump()` and `destroy()` reach the source at once (OverBody).
 *
 * Priming events (an id and no data) and events of blank data are not told (MCP 2025-11-25
 * "Resumability and Redelivery": they carry no message).
 */
import { createSseReader, eventDataOf } from '../wire/sse.js';
import { OverBody, type BackendBody, type BodyEnd } from './body.js';

/** What an {@link sseTappedBody} tells: each event's data as it passes, then that it is done. */
export interface SseTap extends BodyEnd {
  /** `wholeAnswer`: the body was read whole (`bytes()`), so `settled` follows once its events are told. */
  onText(data: string, wholeAnswer: boolean): void;
}

/** `body` unchanged for its reader, `tap.onText` told each event's data; `tap.settled` once it is read to its end, dropped, or failed. */
export function sseTappedBody(body: BackendBody, tap: SseTap): BackendBody {
  return new SseTappedBody(body, tap);
}

class SseTappedBody extends OverBody implements BackendBody {
  constructor(
    body: BackendBody,
    private readonly tap: SseTap,
  ) {
    super(body, tap);
  }

  #tell(data: string, wholeAnswer: boolean): void {
    if (data.trim()) this.tap.onText(data, wholeAnswer);
  }

  bytes(): Promise<Uint8Array> {
    return this.tellWhole(this.source.bytes(), (all) => {
      for (const data of eventDataOf(all)) this.#tell(data, true);
    });
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Buffer> {
    const reader = createSseReader({ onEvent: (data) => this.#tell(data, false) });
    try {
      for await (const chunk of this.source) {
        reader.feed(chunk);
        yield chunk;
      }
    } finally {
      this.done();
    }
  }
}
