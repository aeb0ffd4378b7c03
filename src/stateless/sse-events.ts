/**
 * A 2026-07-28 backend's SSE answer that is too big or too slow to hold (issue 29), relayed to
 * a 2026-07-28 client event by event: an event whose data is a response with a result goes out
 * as its bytes arrive, `resultType` written in where the result closes, so a 1 MB result in
 * one event is never held whole; any other event (progress, a server request, an error) is
 * held to its end and shaped, as before (event-sink.ts).
 *
 * Lines are read here as bytes, not through the SSE parser (wire/sse.ts), because the parser
 * hands on an event only once it is whole. The rules are the parser's (WHATWG HTML §9.2.6
 * "Interpreting an event stream"): a line ends at CRLF, a lone CR or a lone LF; a blank line
 * ends the event; `data` lines are joined with a line break (the sink turns the break into a new
 * `data:` line, so the client joins the same data back); one space after the colon is not part
 * of the value; comments and other fields are dropped (the revision has no resumption, so event
 * ids and `retry` mean nothing to the client: answer-relay.ts); an event the body leaves
 * unended is never dispatched, so a streamed one is left unended too.
 */
import { createEventSink, type EventSink } from './event-sink.js';

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const LINE_BREAK = Buffer.from('\n');

/** Only `data` matters: a field name is kept up to this length. */
const FIELD_MAX = 8;

/** The events of an SSE body, each sent as soon as it can go (see the file's comment). */
export async function* sseAnswerAsEvents(chunks: AsyncIterable<Buffer>, shape: (text: string) => string, streamResults: boolean): AsyncGenerator<Buffer> {
  const relay = sseRelay(() => createEventSink(shape, streamResults));
  for await (const chunk of chunks) {
    const out = relay.feed(chunk);
    if (out.length) yield out.length === 1 ? out[0]! : Buffer.concat(out);
  }
}

function sseRelay(newSink: () => EventSink) {
  let sink: EventSink | undefined;
  /** Where the line is: its start, its field name, or its value (`data` or a field to skip). */
  let at: 'start' | 'field' | 'data' | 'skip' = 'start';
  let field = '';
  let valueStart = false;
  let afterCr = false;
  const out: Buffer[] = [];

  const lineEnd = (chunk: Buffer, i: number): number => {
    if (chunk[i] === CR) {
      if (i + 1 === chunk.length) afterCr = true;
      else if (chunk[i + 1] === LF) i++;
    }
    return i + 1;
  };
  const beginData = () => {
    if (sink) out.push(...sink.feed(LINE_BREAK, false).out);
    else sink = newSink();
    at = 'data';
    valueStart = true;
  };

  return {
    feed(chunk: Buffer): Buffer[] {
      out.length = 0;
      let i = afterCr && chunk[0] === LF ? 1 : 0;
      afterCr = false;
      while (i < chunk.length) {
        const byte = chunk[i]!;
        if (at === 'start' && (byte === LF || byte === CR)) {
          const event = sink?.finish();
          if (event) out.push(event);
          sink = undefined;
          i = lineEnd(chunk, i);
        } else if (at === 'start' || at === 'field') {
          if (at === 'start') [at, field] = ['field', ''];
          if (byte === COLON) {
            if (field === 'data') beginData();
            else at = 'skip';
            i++;
          } else if (byte === LF || byte === CR) {
            // A field name alone: `data` with an empty value.
            if (field === 'data') beginData();
            at = 'start';
            i = lineEnd(chunk, i);
          } else {
            if (field.length <= FIELD_MAX) field += String.fromCharCode(byte);
            i++;
          }
        } else {
          const end = lineBreakAt(chunk, i);
          let from = i;
          if (at === 'data' && valueStart && from < end) {
            if (chunk[from] === SPACE) from++;
            valueStart = false;
          }
          if (at === 'data' && from < end) out.push(...sink!.feed(chunk.subarray(from, end), false).out);
          if (end === chunk.length) break;
          at = 'start';
          i = lineEnd(chunk, end);
        }
      }
      return out.slice();
    },
  };
}

/** The first line break at or after `from`, or the chunk's length: two native searches, not a loop over a 1 MB line. */
function lineBreakAt(chunk: Buffer, from: number): number {
  const lf = chunk.indexOf(LF, from);
  const cr = chunk.indexOf(CR, from);
  if (lf === -1) return cr === -1 ? chunk.length : cr;
  return cr === -1 ? lf : Math.min(lf, cr);
}
