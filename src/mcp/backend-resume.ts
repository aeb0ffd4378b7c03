/**
 * A backend may close the SSE stream of a POST before answering, at an event id, and expect
 * its client to GET the stream back with `Last-Event-ID` after the `retry` it sent (SSE
 * polling, SEP-1699; MCP 2025-11-25 "Transports" §Resumability and Redelivery; servers that
 * negotiated 2025-03-26 do it too). Toward the backend the gateway is that client: it waits
 * what the backend asked, resumes the stream itself and goes on relaying into the same
 * client stream. Its own client sees nothing but the answer, whatever revision either side
 * speaks, and needs no event id of ours to resume (a 2025-03-26 session gets none).
 *
 * Bounded: a backend that keeps closing without sending anything gets the backend's
 * `timeout` from the last message it sent; then the open requests get -32011.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BackendError } from '../backends/errors.js';
import { callerOf } from '../backends/caller.js';
import type { StreamRelay } from '../streams/stream-relay.js';
import type { StreamTarget } from './stream-service.js';

/** Relays `body` into `relay`, resuming the backend's stream as often as it closes it early. */
export async function pumpResuming(t: StreamTarget, relay: StreamRelay, body: AsyncIterable<Buffer>, authorization: string | undefined): Promise<void> {
  const { name, config } = t.backend;
  let progressSeq = relay.lastSeq;
  let deadline = Date.now() + config.timeout;
  while ((await relay.pump(body, { resumable: true })) === 'resumable') {
    if (relay.lastSeq !== progressSeq) {
      progressSeq = relay.lastSeq;
      deadline = Date.now() + config.timeout;
    }
    const { lastEventId, retryMs } = relay.backendPosition;
    const wait = retryMs ?? t.ctx.config.streams.retry;
    if (Date.now() + wait > deadline) {
      relay.fail(new BackendError(name, 'timeout', `backend "${name}" kept closing its stream without answering for ${config.timeout} ms`));
      return;
    }
    t.request.log.debug({ backend: name, lastEventId, waitMs: wait }, 'backend closed the stream before answering; resuming it');
    if (!(await sleep(wait, true, { signal: relay.signal }).catch(() => false)) || relay.finished) return;
    const caller = callerOf(t.request, t.sessionId, t.session.clientCapabilities);
    let res;
    try {
      res = await t.backend.get({ sessionId: t.session.backendSessionId, protocolVersion: t.protocolVersion, lastEventId, authorization, caller }, relay.signal);
    } catch (err) {
      if (relay.finished) return;
      relay.fail(err instanceof BackendError ? err : new BackendError(name, 'stream_broken', `backend "${name}" stream could not be resumed (${(err as Error).message})`));
      return;
    }
    if (res.status !== 200 || res.contentType !== 'text/event-stream') {
      await res.body.dump().catch(() => {});
      relay.fail(new BackendError(name, 'stream_broken', `backend "${name}" answered the resumption of its stream with HTTP ${res.status}`, res.status));
      return;
    }
    // A GET stream is the backend's to keep open: once the answer is through, the gateway
    // ends it (a POST stream would end by itself, and is read to its end).
    relay.onFinish(() => setImmediate(() => res.body.destroy()));
    body = res.body;
  }
}
