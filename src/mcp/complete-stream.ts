/**
 * A backend's SSE answer to a POST that has all arrived and is complete — its events end with
 * the responses to every request of the POST, as SDK servers answer a call that reports
 * progress: progress notifications, then the result — sent to the client as one SSE response
 * with its length, in one write, without a relay (issue 29: such answers cost 1.4× the naive
 * pass-through through the relay, whose stream, writer, keep-alive and lease machinery is
 * there for answers still coming).
 *
 * The client gets what the relay sends (stream-relay.ts): the priming event where its revision
 * wants one (MCP 2025-11-25 "Transports" §Resumability), each event with a gateway event id
 * `<streamId>-<seq>`, events after the last response dropped, then the end. Resumability is
 * what the relay gives an answer written whole (#answeredWhole there): once the response has
 * finished there is nothing to resume and nothing is stored; should the client's connection
 * end first, the stream is stored, and the client can resume it on any replica with the event
 * id it saw ("Resumability and Redelivery").
 */
import type { JsonRpcId } from '../wire/jsonrpc.js';
import { HEADER, wantsPriming } from '../wire/protocol.js';
import { formatSseEvent, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import { answeredIdKeys, idKey } from '../streams/answered-ids.js';
import { whenSettled } from '../streams/sse-writer.js';
import { eventId } from '../streams/stream-relay.js';
import type { StoredEvent } from '../state/store.js';
import { newStreamId, replayLimits, streamKey, type StreamTarget } from './stream-service.js';

/**
 * The events (their data, priming events left out: wire/sse.ts `eventDataOf`) up to the one
 * that answers the last of `requestIds`, or undefined when one is left unanswered (the answer
 * is then relayed: the backend may continue the stream, MCP's SSE polling). Events with blank
 * data are nothing for the client, as the relay reads them.
 */
export function completeAnswerEvents(events: readonly string[], requestIds: readonly JsonRpcId[]): string[] | undefined {
  if (!requestIds.length) return undefined;
  const owed = new Set(requestIds.map(idKey));
  const answer: string[] = [];
  for (const data of events) {
    if (!owed.size) break;
    if (!data.trim()) continue;
    answer.push(data);
    for (const key of answeredIdKeys(data)) owed.delete(key);
  }
  return owed.size ? undefined : answer;
}

/** Answers the POST with `events` as one SSE response (see the module's comment). */
export function sendCompleteStream(t: StreamTarget, events: readonly string[], requestIds: JsonRpcId[]): void {
  const streamId = newStreamId();
  let text = wantsPriming(t.protocolVersion) ? formatSseEvent('', eventId(streamId, 0), t.ctx.config.streams.retry) : '';
  for (let i = 0; i < events.length; i++) text += formatSseEvent(events[i]!, eventId(streamId, i + 1));
  const { reply } = t;
  for (const name in SSE_RESPONSE_HEADERS) reply.header(name, SSE_RESPONSE_HEADERS[name as keyof typeof SSE_RESPONSE_HEADERS]);
  reply.code(200).header(HEADER.sessionId, t.sessionId).send(Buffer.from(text));
  whenSettled(reply.raw, (delivered) => {
    if (delivered) return;
    const stored: StoredEvent[] = [{ seq: 0, meta: { kind: 'post', requestIds } }, ...events.map((data, i) => ({ seq: i + 1, data })), { seq: events.length + 1, end: true }];
    t.ctx.store
      .appendEvents(streamKey(t, streamId), stored, replayLimits(t))
      .catch((err: Error) => t.request.log.warn({ err: err.message, backend: t.backend.name }, 'could not store SSE events for replay'));
  });
}
