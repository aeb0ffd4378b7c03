/**
 * Relays one backend SSE stream to one client SSE stream, and makes it resumable
 * (MCP 2025-11-25 "Resumability and Redelivery").
 *
 * The gateway owns the client-facing event ids (`<streamId>-<seq>`): every message is
 * appended to the stream's replay log in the state store together with the backend's own
 * event id — except a POST stream answered whole in one turn to a client that received it,
 * which nothing could resume (#answeredWhole). A client that lost the connection reconnects with `Last-Event-ID` and gets what
 * it missed; if the backend closed its stream early (SSE polling, SEP-1699) the gateway
 * resumes the backend stream with the backend's last event id. Because the log lives in the
 * store, any replica can resume it.
 *
 * A POST stream keeps reading the backend after the client went away (so the response is
 * not lost); a standalone GET stream stops when its client goes.
 */
import type { FastifyBaseLogger } from 'fastify';
import { BackendError, toBackendError, type BackendFailure } from '../backends/errors.js';
import type { ReplayLimits, StateStore, StoredEvent, StreamKey, StreamMeta } from '../state/store.js';
import { errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import { createSseReader } from '../wire/sse.js';
import { answeredIdKeys, idKey } from './answered-ids.js';
import { BackendAbort } from './backend-abort.js';
import { addCallback, runCallbacks, type Callbacks } from './callbacks.js';
import type { SseWriter } from './sse-writer.js';

export interface RelayContext {
  store: StateStore;
  limits: ReplayLimits;
  /**
   * Bytes of recent events a relay keeps in memory for clients that attach or reattach here
   * (`streams.replayBytes`, as the stored log): with events counted only, 1000 events of
   * 2 MiB would be 2 GB per stream.
   */
  recentBytes: number;
  retryMs: number;
  backend: string;
  log: FastifyBaseLogger;
  /** Told when the backend fails this stream (metrics); one function for all relays, hence the backend's name. */
  onBackendError(backend: string, failure: BackendFailure): void;
}

export const eventId = (streamId: string, seq: number) => `${streamId}-${seq}`;

/** Splits a client's `Last-Event-ID` into stream and sequence; undefined when it is not ours. */
export function parseEventId(value: string): { streamId: string; seq: number } | undefined {
  const match = /^([0-9a-f]{16})-(\d{1,15})$/.exec(value);
  return match ? { streamId: match[1]!, seq: Number(match[2]) } : undefined;
}

/** How long a backend's priming event waits for the answer before it is stored alone (#holdsPriming). */
const PRIMING_HOLD_MS = 100;

/** How long an answered POST stream may stay open before the gateway stops reading it. */
const DRAIN_GRACE_MS = 1_000;

const destroyBody = (body: AsyncIterable<Buffer>) => (body as { destroy?: () => void }).destroy?.();

export class StreamRelay {
  readonly key: StreamKey;
  readonly meta: StreamMeta;
  readonly #ctx: RelayContext;
  readonly #pending: Map<string, JsonRpcId> | undefined; // what this stream still owes; no Map at all for a GET stream (issue 29)
  #recent: StoredEvent[] | undefined; // for clients that attach here; no array until the first event (issue 45 §3: an idle stream's memory)
  #recentSize = 0;
  readonly #abort = new BackendAbort();
  #onFinish: Callbacks;
  #onDetach: Callbacks;
  #seq: number;
  readonly #startSeq: number;
  #writer: SseWriter | undefined;
  #backendLastEventId: string | undefined;
  #backendRetryMs: number | undefined;
  #finished = false;
  #saving: Promise<void> | undefined; // the appends in flight, chained; none before the first
  #unsaved: StoredEvent[] | undefined;
  #flushScheduled = false;
  #primingHold: NodeJS.Timeout | undefined;
  #answeredTo: SseWriter | undefined;
  /**
   * The last sequence number the attached client already has. A replica that died may not
   * have stored the last events it sent (its appends were still on the way), so the relay
   * taking over from the log numbers the backend's replay of them again, with the same
   * numbers; those the client has are stored but not sent twice.
   */
  #clientHasThrough = 0;
  /** A standalone stream the gateway opened before its client came (standalone-early.ts): true until a client attaches here or follows it elsewhere. */
  #awaitingClient = false;
  #onClientCame: Callbacks;
  #pumping = false; // true while pump() reads the backend: finishing from inside it needs no abort
  #hasBackend = false; // whether a backend stream was ever pumped into this relay (false: the gateway's own stream)

  /** @param startSeq the last sequence number already used on this stream (0 for a new one). @param backendLastEventId where the backend stream stands when resuming. */
  constructor(ctx: RelayContext, key: StreamKey, meta: StreamMeta, startSeq = 0, backendLastEventId?: string) {
    this.#ctx = ctx;
    this.key = key;
    this.meta = meta;
    this.#seq = startSeq;
    this.#startSeq = startSeq;
    this.#backendLastEventId = backendLastEventId;
    if (meta.requestIds.length) this.#pending = new Map(meta.requestIds.map((id) => [idKey(id), id]));
    if (startSeq === 0) this.#unsaved = [{ seq: 0, meta }]; // a literal of one: an idle stream keeps it until its first event
  }

  /** Aborts the backend request of this relay (client gone from a GET stream, shutdown, DELETE). */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The backend answered without a stream (405): no request of this relay is in flight, its signal goes (backend-abort.ts). */
  backendIdle(): void {
    this.#abort.release();
  }

  get finished(): boolean {
    return this.#finished;
  }

  get lastSeq(): number {
    return this.#seq;
  }

  /** Marks this relay as opened ahead of its client; `callback` runs when one comes (here or elsewhere). */
  awaitClient(callback: () => void): void {
    this.#awaitingClient = true;
    this.#onClientCame = addCallback(this.#onClientCame, callback);
  }

  /** Opened ahead of its client, and no client has come yet. */
  get awaitingClient(): boolean {
    return this.#awaitingClient && !this.#finished;
  }

  /** A client follows this stream from another replica (it took the awaiting marker there). */
  followedElsewhere(): void {
    this.#clientCame();
  }

  #clientCame(): void {
    if (!this.#awaitingClient) return;
    this.#awaitingClient = false;
    this.#onClientCame = runCallbacks(this.#onClientCame); // awaitClient comes once, before any client
  }

  /** False for a stream with no backend behind it (gateway notifications only). */
  get hasBackend(): boolean {
    return this.#hasBackend;
  }

  onFinish(callback: () => void): void {
    if (this.#finished) callback();
    else this.#onFinish = addCallback(this.#onFinish, callback);
  }

  /**
   * Connects a client stream. Events this relay holds after `afterSeq` (default: where the
   * relay started, so messages injected while it waited for its backend are not lost) are
   * sent first, synchronously, so nothing can slip between the replay and the live events.
   * A fresh stream may get a priming event first.
   */
  attach(writer: SseWriter, afterSeq?: number, prime = false): void {
    const previous = this.#writer;
    this.#writer = writer;
    this.#clientCame();
    if (previous && previous !== writer) previous.end();
    if (afterSeq === undefined && prime) writer.prime(eventId(this.key.streamId, this.#startSeq), this.#ctx.retryMs);
    const from = afterSeq ?? this.#startSeq;
    if (afterSeq !== undefined) this.#clientHasThrough = afterSeq;
    for (const e of this.#recent ?? []) if (e.seq > from && e.data !== undefined) writer.message(e.data, eventId(this.key.streamId, e.seq));
    writer.onClose(() => {
      if (this.#writer !== writer) return;
      this.#writer = undefined;
      if (this.meta.kind === 'get') this.stop();
      else if (!this.#finished) runCallbacks(this.#onDetach);
    });
    if (this.#finished) writer.end();
  }

  /**
   * Called when the client of an unfinished POST stream goes away: the relay goes on reading
   * the backend, and another replica may have to follow it (stream-leases.ts).
   */
  onDetach(callback: () => void): void {
    this.#onDetach = addCallback(this.#onDetach, callback);
  }

  /** Ends the client's connection with `retry` but keeps reading the backend (shutdown drain). */
  detach(): void {
    if (!this.#writer) return;
    this.#writer.retry(this.#ctx.retryMs);
    this.#writer.end();
  }

  /**
   * Reads the backend's SSE body to its end, relaying and logging every message. With
   * `resumable`, a POST stream the backend closed before answering, at an event id, is left
   * open ('resumable': the caller resumes the backend stream itself, mcp/backend-resume.ts);
   * otherwise the client is told to reconnect, or the open requests get an error.
   */
  async pump(body: AsyncIterable<Buffer>, options: { resumable?: boolean } = {}): Promise<'ended' | 'resumable'> {
    const reader = createSseReader({ onEvent: (data, id) => this.#onBackendEvent(data, id), onRetry: (ms) => (this.#backendRetryMs = ms) });
    let failure: BackendError | undefined;
    let drainTimer: NodeJS.Timeout | undefined;
    this.#pumping = true;
    this.#hasBackend = true;
    try {
      for await (const chunk of body) {
        if (this.#finished) {
          // Answered: read on to the end the backend is about to send rather than break out,
          // which would destroy the body with an AbortError (costly on every call). A backend
          // that keeps the stream open gets a short grace, then the body is destroyed.
          drainTimer ??= setTimeout(() => destroyBody(body), DRAIN_GRACE_MS);
          continue;
        }
        reader.feed(chunk);
      }
    } catch (err) {
      if (!this.#abort.aborted && !this.#finished) failure = toBackendError(this.#ctx.backend, err, 'stream');
    } finally {
      if (drainTimer) clearTimeout(drainTimer);
      this.#pumping = false;
    }
    if (this.#finished) return 'ended';
    if (options.resumable && !failure && this.meta.kind === 'post' && this.#backendLastEventId) return 'resumable';
    this.#afterBackendEnded(failure);
    return 'ended';
  }

  /** Where the backend's stream stands and how long it asked to be given before a reconnect (its last `retry`). */
  get backendPosition(): { lastEventId?: string; retryMs?: number } {
    return { lastEventId: this.#backendLastEventId, retryMs: this.#backendRetryMs };
  }

  /** Sends a gateway-originated message on this stream (e.g. notifications/elicitation/complete). */
  inject(data: string): void {
    if (!this.#finished) this.#emit(data, undefined);
  }

  /** Ends this relay because the backend is unavailable; open requests get a JSON-RPC error. */
  fail(error: BackendError): void {
    if (!this.#finished) this.#afterBackendEnded(error);
  }

  /** The backend (or the aggregated endpoint) this stream relays. */
  get backend(): string {
    return this.#ctx.backend;
  }

  /** Stops relaying without owing anything (client gone from a GET stream, session deleted, shutdown); `forGood` (a reload removed the backend, src/reload/) puts the end in the replay log, so a client following the stream from another replica (stream-follow.ts) ends too instead of taking it over. */
  stop(forGood = false): void {
    this.#abort.abort();
    if (this.#finished) return;
    this.#writer?.retry(this.#ctx.retryMs);
    this.#finish(forGood);
  }

  /** Waits until everything emitted so far is in the store. */
  flushed(): Promise<void> {
    this.#flush();
    return this.#saving ?? Promise.resolve();
  }

  #onBackendEvent(data: string, backendEventId: string | undefined): void {
    if (backendEventId) this.#backendLastEventId = backendEventId;
    if (!data.trim()) {
      // A backend priming event: nothing for the client, but remember where the backend stands.
      if (backendEventId) this.#save({ seq: this.#seq, backendEventId });
      return;
    }
    this.#emit(data, backendEventId);
    if (this.meta.kind === 'post') {
      this.#settle(data);
      if (!this.#pending?.size) this.#finish(true);
    }
  }

  /** Removes the request ids answered by this message from the pending set. */
  #settle(data: string): void {
    for (const key of answeredIdKeys(data)) this.#pending?.delete(key);
  }

  #afterBackendEnded(failure: BackendError | undefined): void {
    if (this.meta.kind === 'get') {
      // The client reconnects after `retry`; the gateway then resumes the backend stream.
      this.#writer?.retry(this.#ctx.retryMs);
      this.#finish(false);
      return;
    }
    if (!failure && this.#backendLastEventId) {
      // SSE polling: the backend closed the stream before answering and will continue it on
      // a GET with Last-Event-ID. Let the client reconnect and resume through us.
      this.#writer?.retry(this.#ctx.retryMs);
      this.#finish(false);
      return;
    }
    const error = failure ?? new BackendError(this.#ctx.backend, 'stream_broken', `backend "${this.#ctx.backend}" closed the stream before responding`);
    this.#ctx.log.warn({ backend: this.#ctx.backend, failure: error.failure }, 'backend stream ended without a response');
    this.#ctx.onBackendError(this.#ctx.backend, error.failure);
    for (const id of this.#pending?.values() ?? []) {
      this.#emit(JSON.stringify(errorResponse(id, error.rpcCode, error.message, { ...error.rpcData, backend: this.#ctx.backend })), undefined);
    }
    this.#pending?.clear();
    this.#finish(true);
  }

  #emit(data: string, backendEventId: string | undefined): void {
    const event: StoredEvent = { seq: ++this.#seq, data };
    if (backendEventId) event.backendEventId = backendEventId;
    const recent = (this.#recent ??= []);
    recent.push(event);
    this.#recentSize += data.length;
    // The newest event stays whatever its size; older ones go past either bound.
    while (recent.length > 1 && (recent.length > this.#ctx.limits.maxEvents || this.#recentSize > this.#ctx.recentBytes)) {
      this.#recentSize -= recent.shift()!.data?.length ?? 0;
    }
    this.#save(event);
    if (event.seq > this.#clientHasThrough) this.#writer?.message(data, eventId(this.key.streamId, event.seq));
  }

  /** The client resuming this stream already has every event up to `seq` (its Last-Event-ID). */
  clientHasThrough(seq: number): void {
    this.#clientHasThrough = seq;
  }

  /**
   * Events emitted in one tick are stored together: a one-message answer and its end marker
   * (and, on a new stream, its meta entry) cost one Redis round trip, not three.
   */
  #save(event: StoredEvent): void {
    (this.#unsaved ??= []).push(event);
    if (this.#holdsPriming(event)) return;
    if (this.#primingHold) {
      clearTimeout(this.#primingHold);
      this.#primingHold = undefined;
    }
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => this.#flush());
  }

  /**
   * A backend's priming event on a new POST stream (nothing for the client yet) is held back
   * for up to {@link PRIMING_HOLD_MS}: SDK servers with an event store prime every answer, and
   * a quick answer then travels with it as one whole stream (#answeredWhole). A slower one
   * gets its start stored when the hold ends, as before, so another replica can take over.
   */
  #holdsPriming(event: StoredEvent): boolean {
    if (this.meta.kind !== 'post' || this.#startSeq !== 0 || this.#seq !== 0 || event.data !== undefined || event.end) return false;
    this.#primingHold ??= setTimeout(() => {
      this.#primingHold = undefined;
      this.#flush();
    }, PRIMING_HOLD_MS);
    return true;
  }

  #flush(): void {
    this.#flushScheduled = false;
    const batch = this.#unsaved;
    if (!batch?.length) return;
    this.#unsaved = undefined;
    const writer = this.#answeredTo;
    if (writer && this.#answeredWhole(batch)) {
      // Stored only if the client may come back for it (issue 16): see #answeredWhole.
      writer.onSettled((delivered) => delivered || this.#append(batch));
      return;
    }
    this.#append(batch);
  }

  /**
   * True when `batch` is this POST stream from its start to its end, emitted in one turn to
   * the client attached here: the answer went out whole, in one write with the stream's end.
   * Once the response has finished there is nothing to resume, so nothing is stored — the
   * usual one-event answer then costs no Redis call at all. If the connection ends before the
   * response finished, the batch is stored after all, and the client can resume it on any
   * replica with the event ids it saw (MCP 2025-11-25 "Resumability and Redelivery").
   */
  #answeredWhole(batch: readonly StoredEvent[]): boolean {
    return this.meta.kind === 'post' && this.#finished && this.#startSeq === 0 && this.#clientHasThrough === 0 && batch[0]?.seq === 0 && batch.at(-1)?.end === true;
  }

  #append(batch: StoredEvent[]): void {
    this.#saving = (this.#saving ?? Promise.resolve())
      .then(() => this.#ctx.store.appendEvents(this.key, batch, this.#ctx.limits))
      .catch((err: Error) => this.#ctx.log.warn({ err: err.message, backend: this.#ctx.backend }, 'could not store SSE events for replay'));
  }

  #finish(complete: boolean): void {
    if (this.#finished) return;
    this.#finished = true;
    // The client the whole answer was written to, if it is still there (#flush asks it).
    if (complete && this.#writer && !this.#writer.closed) this.#answeredTo = this.#writer;
    if (complete) this.#save({ seq: ++this.#seq, end: true });
    this.#writer?.end();
    // From inside pump() the loop simply stops reading; an abort would only build an error.
    if (!this.#pumping) this.#abort.abort();
    // #finished is set: a callback added while these run is called at once, none is lost.
    this.#onFinish = runCallbacks(this.#onFinish);
  }
}
