/**
 * Rewrites the messages of a backend's SSE body on their way to the client, event by event,
 * without waiting for the stream to end (progress and server→client requests must arrive
 * while a call runs). Used where routing must change what passes through (SPEC §1: "params
 * and results untouched except where routing must rewrite them"): names namespaced by the
 * aggregated endpoint, tools removed by a tool policy.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser } from 'eventsource-parser';

/** The event to send instead, or undefined to drop it. `data` is '' for a priming event. */
export type SseEventTransform = (data: string, id: string | undefined) => { data: string; id?: string } | undefined;

/** One SSE event in wire form; multi-line data becomes several `data:` lines. */
export function formatSseEvent(data: string, id?: string): string {
  let text = id !== undefined ? `id: ${id}\n` : '';
  for (const line of data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  return `${text}\n`;
}

export async function* transformSse(body: AsyncIterable<Buffer | string>, transform: SseEventTransform): AsyncGenerator<Buffer> {
  let out: string[] = [];
  const parser = createParser({
    onEvent: (event) => {
      const next = transform(event.data, event.id);
      if (next) out.push(formatSseEvent(next.data, next.id));
    },
  });
  const decoder = new StringDecoder('utf8');
  for await (const chunk of body) {
    parser.feed(typeof chunk === 'string' ? chunk : decoder.write(chunk));
    if (out.length) {
      const ready = out.join('');
      out = [];
      yield Buffer.from(ready);
    }
  }
}
