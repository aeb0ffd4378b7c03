/**
 * A 2026-07-28 backend's JSON answer that is a stream — JSON lines (several messages, one per
 * line, as the conformance suite's reference server answers `subscriptions/listen` and a call
 * with progress), or one message too big or too slow to hold (issue 29) — relayed to a
 * 2026-07-28 client as SSE events, one per message, each as soon as it can go: a response with
 * a result as its bytes arrive, anything else once whole (event-sink.ts).
 *
 * Why SSE, even for a single streamed response: the headers of a stream go before its first
 * message is known (a listen with nothing to say yet must still answer at once), and SSE is
 * the one framing a 2026-07-28 client reads as a stream (it must accept `text/event-stream`,
 * "Transports" §Sending Messages); an `application/json` body is one message to it, and a body
 * whose first message is a notification must go on as events.
 */
import { createEventSink, type EventSink } from './event-sink.js';

export interface EventsOptions {
  /** Makes a held message's text a 2026-07-28 one (result-shaping.ts). */
  shape(text: string): string;
  /** Whether a response's result may stream (false where its shaping needs it whole). */
  streamResults: boolean;
  /** Runs once the reply's headers are set, before the first chunk is awaited (a stream's headers go at once). */
  begin?: () => void;
}

/** The messages of `chunks` as SSE events, each sent as soon as it can go. */
export async function* jsonMessagesAsEvents(chunks: AsyncIterable<Buffer>, options: EventsOptions): AsyncGenerator<Buffer> {
  options.begin?.();
  const next = () => createEventSink(options.shape, options.streamResults);
  let sink: EventSink = next();
  let begun = false;
  for await (const chunk of chunks) {
    const out: Buffer[] = [];
    for (let at = begun ? 0 : skipSpace(chunk, 0); at < chunk.length; ) {
      begun = true;
      const fed = sink.feed(chunk.subarray(at), true);
      out.push(...fed.out);
      at += fed.used;
      if (!sink.valueEnded) continue;
      const event = sink.finish();
      if (event) out.push(event);
      sink = next();
      begun = false;
      at = skipSpace(chunk, at);
    }
    if (out.length) yield out.length === 1 ? out[0]! : Buffer.concat(out);
  }
  // A last value cut short: held, it goes as it is (as before); streamed, its event is left
  // unended, so the client drops it as the backend's own cut would have (WHATWG HTML §9.2.6).
  const rest = sink.streaming ? undefined : sink.finish();
  if (rest) yield rest;
}

function skipSpace(chunk: Buffer, at: number): number {
  while (at < chunk.length && (chunk[at] === 0x20 || chunk[at] === 0x0a || chunk[at] === 0x0d || chunk[at] === 0x09)) at++;
  return at;
}
