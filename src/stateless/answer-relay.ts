/**
 * A 2026-07-28 backend's answer, relayed to a 2026-07-28 client (MCP 2026-07-28
 * "Transports" §Receiving Messages, §Cancellation).
 *
 * - A JSON answer that is one message, small and ended soon, is read whole and sent in one
 *   write with its result shaped (result-shaping.ts; the bounds: backends/held-answer.ts).
 *   Several messages as JSON lines — the conformance suite's reference server answers
 *   `subscriptions/listen` so, chunked and left open, and a call with its progress first — and
 *   a body that does not end soon are relayed message by message as they come, as SSE events:
 *   the framing every 2026-07-28 client accepts for a stream (it must list `text/event-stream`
 *   in `Accept`, §Sending Messages), where an `application/json` body is one message.
 * - An SSE answer whose only event is the response, then the end (SDK servers' default), is
 *   answered as that message alone, shaped, in one write with its length.
 * - Any other SSE answer is rewritten event by event as it arrives, so progress and log
 *   notifications reach the client while the call runs: the revision has no resumption, so
 *   event ids and priming events are dropped (a client must not try `Last-Event-ID` against
 *   the gateway), and the final response is shaped.
 * - A `subscriptions/listen` stream also carries the list changes the gateway itself causes
 *   (a pin approval, a reload), between the backend's events (relayed-listen.ts).
 * - A response too big or too slow to hold, in either form, is sent as its bytes arrive, with
 *   `resultType` written in as they pass (event-sink.ts; issue 29: a 1 MB tool result is never
 *   held whole).
 * - Closing the response stream is the cancellation of the request: when the client goes,
 *   the backend's body is destroyed, which closes that connection, which is the backend's
 *   cancellation signal in turn. Nothing else is sent for it.
 * - An error the backend judged the client for (a 4xx with a JSON-RPC body: invalid params,
 *   method not found, unsupported version) passes on with its status; anything else is a
 *   backend failure, mapped by the one table (backends/errors.ts).
 */
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import { sendBackendError } from '../http/replies.js';
import type { JsonRpcId } from '../wire/jsonrpc.js';
import { soleEventData, transformSse, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import { createJsonMessageSplitter, maySpanLines } from '../wire/json-lines.js';
import { jsonMessagesAsEvents } from './json-lines-events.js';
import { sseAnswerAsEvents } from './sse-events.js';
import { heldChunks, holdAnswer } from '../backends/held-answer.js';
import { answersExactly } from '../streams/answered-ids.js';
import type { RelayedListen } from './relayed-listen.js';
import { shapeMessageBytes, shapeMessageText, streamsResults } from './result-shaping.js';

export interface StatelessAnswer {
  backend: string;
  /** The method the client called: which results are cacheable. */
  method: string;
  /** The client's request id, or undefined for a notification. */
  id: JsonRpcId | undefined;
  /** Whether the backend's `"public"` cache scope may stand (result-shaping.ts). */
  shared: boolean;
  /** A `subscriptions/listen`: the gateway's own list changes go into its stream too (relayed-listen.ts). */
  listen?: RelayedListen;
}

export async function relayStatelessAnswer(reply: FastifyReply, res: BackendResponse, answer: StatelessAnswer): Promise<FastifyReply | void> {
  const ok = res.status >= 200 && res.status < 300;
  if (res.status === 202 && answer.id === undefined) {
    await res.body.dump();
    return reply.code(202).send();
  }
  if (ok && res.contentType === 'application/json') {
    const held = await holdAnswer(res);
    const messages = held.whole && maySpanLines(held.whole) ? createJsonMessageSplitter().feed(held.whole) : undefined;
    const one = messages?.length === 1 ? messages[0] : messages ? undefined : held.whole;
    if (one) {
      // Not `return reply`: an async function that returns the reply makes every caller's await
      // adopt it as a thenable, two more turns each (npm run bench, issue 15).
      reply.code(200).type('application/json').send(shapeMessageBytes(one, answer.method, answer.shared));
      return;
    }
    // A stream's headers go at once: a listen with nothing to say yet, or a message still
    // arriving, is an open answer the client sees begin (its first bytes are then events).
    const begin = held.stream ? () => reply.raw.flushHeaders() : undefined;
    const shape = shaperOf(answer);
    return sendEvents(reply, res, withNotices(jsonMessagesAsEvents(heldChunks(held), { shape, streamResults: streamsResults(answer.method), begin }), answer, res));
  }
  if (ok && res.contentType === 'text/event-stream') {
    const held = await holdAnswer(res);
    // The response as the only event, then the end (SDK servers' default): that message alone, with its length.
    const data = held.whole && answer.id !== undefined ? soleEventData(held.whole) : undefined;
    if (data !== undefined && answersExactly(data, [answer.id!])) {
      reply.code(200).type('application/json').send(Buffer.from(shapeMessageText(data, answer.method, answer.shared)));
      return;
    }
    const shape = shaperOf(answer);
    // A body held whole is small: its events are shaped whole. One still arriving is relayed
    // as it comes, a response's data streamed (sse-events.ts).
    const events = held.whole
      ? transformSse(heldChunks(held), (data) => (data === '' ? undefined : { data: shape(data) }))
      : sseAnswerAsEvents(held.stream, shape, streamsResults(answer.method));
    return sendEvents(reply, res, withNotices(events, answer, res));
  }
  if (res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403 && res.contentType === 'application/json') {
    const held = await holdAnswer(res);
    return reply.code(res.status).type('application/json').send(held.whole ?? Readable.from(held.stream, { objectMode: false }));
  }
  await res.body.dump().catch(() => {});
  const failure = new BackendError(answer.backend, 'bad_status', `backend "${answer.backend}" answered HTTP ${res.status}`, res.status);
  return sendBackendError(reply, failure, answer.id === undefined ? [] : [answer.id], false);
}

/**
 * Makes a held message's text a 2026-07-28 one; a listen also reads it for the backend's
 * acknowledgement (which lists, which subscription id: relayed-listen.ts).
 */
function shaperOf(answer: StatelessAnswer): (text: string) => string {
  return (text) => {
    answer.listen?.observe(text);
    return shapeMessageText(text, answer.method, answer.shared);
  };
}

/** A listen's events with the gateway's notices between them; any other answer's as they are. */
function withNotices(events: AsyncIterable<Buffer>, answer: StatelessAnswer, res: BackendResponse): AsyncIterable<Buffer> {
  return answer.listen ? answer.listen.relay(events, () => res.body.destroy()) : events;
}

function sendEvents(reply: FastifyReply, res: BackendResponse, events: AsyncIterable<Buffer>): FastifyReply {
  // The client leaving is the request's cancellation: stop reading, which closes the backend's
  // connection. (The response's `close`, not the request's: that one fires once the body is read.)
  const cancel = () => {
    if (!reply.raw.writableFinished) res.body.destroy();
  };
  reply.raw.once('close', cancel);
  const body = Readable.from(events, { objectMode: false });
  body.once('close', () => reply.raw.off('close', cancel));
  return reply
    .code(200)
    .headers(SSE_RESPONSE_HEADERS)
    .send(body);
}
