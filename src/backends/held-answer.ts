/**
 * How much of a backend's answer the gateway reads before it answers its client: the one
 * decision for every relay of a JSON answer (mcp/routes.ts, stateless/answer-relay.ts) and of
 * a one-event SSE answer (mcp/stream-service.ts), issue 29.
 *
 * A small answer is read whole and sent in one write with its length: piping a body through
 * the reply costs a chunk per write, the terminating chunk's own syscall and the stream
 * machinery's allocations (`npm run bench`, "chunked JSON"). Most backends do not declare the
 * length (SDK v2 servers answer through a web `Response`, SDK v1 servers with a chunked SSE
 * body), so the end of the body decides, within two bounds:
 *
 * - {@link HELD_ANSWER_MAX_BYTES}: past it the answer is streamed, what was read first and the
 *   rest as it comes, so a big answer is never held whole;
 * - {@link HELD_ANSWER_QUIET_MS}: a body that has not ended by then is a stream (a
 *   `subscriptions/listen` sent as JSON lines, a call sending progress) or slow, and is relayed
 *   as it comes; waiting for its end could mean waiting forever.
 *
 * A declared length up to {@link DECLARED_ANSWER_MAX_BYTES} is read whole as before: the
 * backend said the body ends, and how soon.
 */
import type { BackendResponse } from './backend.js';
import { asBuffer, type BackendBody } from './body.js';
import { headerValue } from '../wire/headers.js';

/**
 * An undeclared body is held up to this size. Tool results are a few KB; 256 KiB holds nearly
 * every answer while a client's answers in flight cost at most that each, and past it the
 * per-chunk cost of streaming is small beside the bytes themselves.
 */
export const HELD_ANSWER_MAX_BYTES = 256 * 1024;

/** A declared length up to this is read whole (the backend promised the end). */
export const DECLARED_ANSWER_MAX_BYTES = 1024 * 1024;

/**
 * A body not ended this long after its headers is relayed as it comes. Far above the gap
 * between a local server's writes of one answer (well under a millisecond), far below what a
 * listener would notice on its acknowledgement.
 */
export const HELD_ANSWER_QUIET_MS = 25;

/** The answer read whole, or to be streamed: what was read first, then the rest as it arrives. */
export type HeldAnswer = { whole: Buffer; stream?: undefined } | { whole?: undefined; stream: HeldStream };

/** The rest of a body, to read as it comes; `destroy` gives it up (the backend's connection is closed). */
export type HeldStream = AsyncIterable<Buffer> & { destroy(): void };

type Step = IteratorResult<Buffer | string>;

/** Reads the answer's body whole when it is small and ends soon; otherwise hands it on as a stream without waiting. */
export async function holdAnswer(res: BackendResponse, quietMs = HELD_ANSWER_QUIET_MS): Promise<HeldAnswer> {
  const declared = Number(headerValue(res.headers['content-length']));
  if (declared <= DECLARED_ANSWER_MAX_BYTES) return { whole: asBuffer(await res.body.bytes()) };
  if (declared > DECLARED_ANSWER_MAX_BYTES) return { stream: res.body };
  const body = res.body;
  // All there already (the usual answer: headers, body and end in one read of the socket), and
  // small: the backend's flow control pauses a body past 64 KiB unread (exchange.ts), so one
  // that has ended unread is within the bound.
  if (hasArrived(body)) {
    const whole = asBuffer(await body.bytes());
    return whole.length <= HELD_ANSWER_MAX_BYTES ? { whole } : { stream: destroyable(body, oneChunk(whole)) };
  }
  const chunks = (body as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let size = 0;
  let timer: NodeJS.Timeout | undefined;
  let quiet: Promise<'quiet'> | undefined;
  try {
    for (;;) {
      const next = chunks.next();
      // Already all there (the usual answer: headers, body and end in one read): no timer.
      const step = hasArrived(body) ? await next : await Promise.race([next, (quiet ??= new Promise((resolve) => (timer = setTimeout(resolve, quietMs, 'quiet'))))]);
      if (step === 'quiet') return { stream: destroyable(body, continued(body, head, chunks, next)) };
      if (step.done) return { whole: head.length === 1 ? head[0]! : Buffer.concat(head, size) };
      const chunk = asBuffer(step.value);
      head.push(chunk);
      size += chunk.length;
      if (size > HELD_ANSWER_MAX_BYTES) return { stream: destroyable(body, continued(body, head, chunks, undefined)) };
    }
  } finally {
    clearTimeout(timer);
  }
}

/** What was held, then the read in flight, then the rest; the body is given up when the consumer stops early. */
async function* continued(body: BackendBody, head: Buffer[], chunks: AsyncIterator<Buffer | string>, pending: Promise<Step> | undefined): AsyncGenerator<Buffer> {
  let done = false;
  try {
    yield* head;
    for (let step = await (pending ?? chunks.next()); !step.done; step = await chunks.next()) yield asBuffer(step.value);
    done = true;
  } finally {
    if (!done) body.destroy();
  }
}

/** The answer as chunks to relay, whether it was held whole or not. */
export function heldChunks(held: HeldAnswer): AsyncIterable<Buffer> {
  return held.stream ?? oneChunk(held.whole);
}

async function* oneChunk(chunk: Buffer): AsyncGenerator<Buffer> {
  yield chunk;
}

function destroyable(body: BackendBody, rest: AsyncIterable<Buffer>): HeldStream {
  return { [Symbol.asyncIterator]: () => rest[Symbol.asyncIterator](), destroy: () => body.destroy() };
}

/** A getter that changes as the body arrives: asked each time, never narrowed. */
function hasArrived(body: BackendBody): boolean {
  return body.arrived === true;
}
