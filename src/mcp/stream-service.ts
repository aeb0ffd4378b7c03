/**
 * Opening, attaching and resuming client SSE streams (MCP 2025-11-25 "Transports":
 * "Sending Messages to the Server", "Listening for Messages from the Server",
 * "Resumability and Redelivery"). The relay does the streaming; this module decides which
 * relay a client connection belongs to.
 */
import { randomBytes } from 'node:crypto';
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { BackendError } from '../backends/errors.js';
import type { BackendResponse, McpBackend } from '../backends/backend.js';
import type { ReplayLimits, SessionRecord, StoredEvent, StreamKey, StreamMeta } from '../state/store.js';
import type { McpContext } from './context.js';
import { callerOf } from '../backends/caller.js';
import { HEADER, wantsPriming } from '../wire/protocol.js';
import { ErrorCode, type JsonRpcId } from '../wire/jsonrpc.js';
import { sendBackendError, sendJsonRpcError, sendSessionNotFound } from '../http/replies.js';
import { followRemoteStream } from '../streams/stream-follow.js';
import { claimStandalone, holdWhileDetached } from '../streams/stream-leases.js';
import { StateUnavailableError } from '../state/errors.js';
import { SseWriter } from '../streams/sse-writer.js';
import { eventId, StreamRelay, type RelayContext } from '../streams/stream-relay.js';
import { answeredIdKeys, idKey } from '../streams/answered-ids.js';
import { attachAwaiting, followAwaiting } from './standalone-early.js';
import { pumpResuming } from './backend-resume.js';
import { principalOf } from '../auth/authenticate.js';

export interface StreamTarget {
  ctx: McpContext;
  request: FastifyRequest;
  reply: FastifyReply;
  backend: McpBackend;
  sessionId: string;
  session: SessionRecord;
  protocolVersion: string;
}

/**
 * Stream ids need to be unique within a session, not secret (a stream is only ever looked up
 * under its user and session): a random per-process prefix and a counter give that without
 * asking the CSPRNG on every call (it showed in the bench profile).
 */
const STREAM_ID_PREFIX = randomBytes(4).toString('hex');
let streamCounter = 0;
/** Built by `join`, one flat string: `+` would leave a concatenated-string node that every idle stream keeps (issue 29). */
export const newStreamId = () => [STREAM_ID_PREFIX, (streamCounter = (streamCounter + 1) >>> 0).toString(16).padStart(8, '0')].join('');

/** The meta of every standalone (GET) stream, one frozen object for all of them (issue 45 §3): a relay never changes its meta. */
export const STANDALONE_META: StreamMeta = Object.freeze({ kind: 'get', requestIds: Object.freeze([]) as unknown as JsonRpcId[] });

/** How much of a stream's replay log is kept, and how long (config `streams.replayEvents`, `streams.replayTtl`). */
export function replayLimits(t: StreamTarget): ReplayLimits {
  const { streams } = t.ctx.config;
  return { maxEvents: streams.replayEvents, ttlMs: streams.replayTtl };
}

type BackendErrors = McpContext['metrics']['backendErrors'];

/**
 * The relays' count of backend failures, one function per metrics instance: a closure per
 * relay was a third of a KiB of every idle stream (issue 45 §3).
 */
const backendErrorCounters = new WeakMap<BackendErrors, RelayContext['onBackendError']>();

function countBackendError(backendErrors: BackendErrors): RelayContext['onBackendError'] {
  let count = backendErrorCounters.get(backendErrors);
  if (!count) backendErrorCounters.set(backendErrors, (count = (backend, failure) => backendErrors.inc({ backend, reason: failure })));
  return count;
}

/** Holds nothing of `t` itself: a stream's relay lives as long as the stream, and `t` names the whole request (issue 29). */
export function relayContext(t: StreamTarget): RelayContext {
  const { streams } = t.ctx.config;
  return {
    store: t.ctx.store,
    limits: replayLimits(t),
    recentBytes: streams.replayBytes,
    retryMs: streams.retry,
    backend: t.backend.name,
    log: t.request.log,
    onBackendError: countBackendError(t.ctx.metrics.backendErrors),
  };
}

/**
 * Takes the response over from Fastify for an SSE stream. Headers the route's hooks already
 * set on the reply (the rate limiter's `x-ratelimit-*`) go out with the stream's own.
 */
export function openWriter(t: StreamTarget): SseWriter {
  const headers: OutgoingHttpHeaders = { ...(t.reply.getHeaders() as OutgoingHttpHeaders), [HEADER.sessionId]: t.sessionId };
  t.reply.hijack();
  return new SseWriter(t.reply.raw, { keepAliveMs: t.ctx.config.streams.keepAlive, maxBufferedBytes: t.ctx.config.streams.maxBufferedBytes, headers });
}

export function streamKey(t: StreamTarget, streamId: string): StreamKey {
  return { userKey: principalOf(t.request).userKey, sessionId: t.sessionId, streamId };
}

/**
 * Relays the backend's SSE answer to a POST; keeps reading after the client leaves so the
 * answer can be resumed, and resumes the backend's stream when it closes it early
 * (backend-resume.ts) with the same `authorization` the POST carried.
 */
export async function relayPostStream(t: StreamTarget, body: AsyncIterable<Buffer>, requestIds: JsonRpcId[], authorization?: string): Promise<void> {
  const relay = new StreamRelay(relayContext(t), streamKey(t, newStreamId()), { kind: 'post', requestIds });
  t.ctx.streams.add(relay);
  holdWhileDetached(t.ctx.coordinator, relay, t.request.log);
  relay.attach(openWriter(t), undefined, wantsPriming(t.protocolVersion));
  await pumpResuming(t, relay, body, authorization);
}

/**
 * GET without Last-Event-ID: the session's standalone stream, one per session across all
 * replicas. It exists even when the backend offers none (405), because gateway-originated
 * notifications travel on it.
 */
export async function openStandaloneStream(t: StreamTarget): Promise<FastifyReply | void> {
  const principal = principalOf(t.request);
  const local = t.ctx.streams.standalone(principal.userKey, t.sessionId);
  if (local) return local.awaitingClient ? attachAwaiting(t, local) : sendConflict(t.reply);
  if (t.ctx.streams.size >= t.ctx.config.streams.maxOpen) {
    t.reply.header('retry-after', '5');
    return sendJsonRpcError(t.reply, 503, ErrorCode.InternalError, 'Too many open streams on this replica; retry shortly');
  }
  if (t.ctx.streams.forUser(principal.userKey) >= t.ctx.config.streams.maxPerUser) {
    // The user's own streams fill their share: close some (or end idle sessions) first.
    t.reply.header('retry-after', '5');
    return sendJsonRpcError(t.reply, 429, ErrorCode.RateLimited, `Too many open streams for this user (streams.maxPerUser ${t.ctx.config.streams.maxPerUser}); close some first`);
  }
  const relay = new StreamRelay(relayContext(t), streamKey(t, newStreamId()), STANDALONE_META);
  // Registered before any await, so that two GETs arriving together here cannot both pass
  // the check above; the cluster-wide claim covers GETs on other replicas.
  t.ctx.streams.add(relay);
  const claim = await guardState(() => claimStandalone(t.ctx.coordinator, relay, false, t.request.log)).catch((err: unknown) => {
    relay.stop();
    throw err;
  });
  if (!claim.granted) {
    relay.stop();
    // Opened by the gateway on another replica before this client came: follow it there.
    if (await followAwaiting(t, claim.previous)) return;
    return sendConflict(t.reply);
  }
  return continueFromBackend(t, relay, undefined, undefined, claim.mailbox);
}

/**
 * GET with Last-Event-ID: replay what the client missed, then continue the stream live —
 * attached to the relay when it runs here, following it over Redis when another replica
 * still reads it, or taking it over from the replay log and the backend otherwise.
 */
export async function resumeStream(t: StreamTarget, streamId: string, afterSeq: number): Promise<FastifyReply | void> {
  const key = streamKey(t, streamId);
  const live = t.ctx.streams.get(key.userKey, key.sessionId, streamId);
  if (live && !live.finished) {
    live.attach(openWriter(t), afterSeq);
    return;
  }
  const holder = await guardState(() => t.ctx.coordinator.streamHolder(key));
  t.request.log.debug({ streamId, afterSeq, heldElsewhere: Boolean(holder && holder !== t.ctx.coordinator.replicaId) }, 'resuming a stream');
  if (holder && holder !== t.ctx.coordinator.replicaId) {
    return followRemoteStream({ coordinator: t.ctx.coordinator, store: t.ctx.store, key, log: t.request.log }, openWriter(t), afterSeq, (writer, lastSeq) => resumeFromStore(t, streamId, lastSeq, writer));
  }
  return resumeFromStore(t, streamId, afterSeq, undefined);
}

/** Replays the retained log after `afterSeq` and continues the stream from the backend. */
export async function resumeFromStore(t: StreamTarget, streamId: string, afterSeq: number, openedWriter: SseWriter | undefined): Promise<FastifyReply | void> {
  const key = streamKey(t, streamId);
  const events = await guardState(() => t.ctx.store.readEvents(key));
  const meta = events.find((e) => e.meta)?.meta;
  if (!meta) {
    if (openedWriter) return openedWriter.end();
    // Unknown or expired stream: there is nothing to replay; give the client a fresh stream.
    t.request.log.info({ streamId }, 'Last-Event-ID names no retained stream; opening a new standalone stream');
    return openStandaloneStream(t);
  }
  const known = summarize(events);
  t.request.log.debug({ streamId, kind: meta.kind, lastSeq: known.lastSeq, ended: known.ended, backendEventId: known.backendEventId }, 'continuing a stream from its replay log');
  const relay = new StreamRelay(relayContext(t), key, remainingMeta(meta, events), known.lastSeq, known.backendEventId);
  // The log can end before the client's Last-Event-ID when the replica that sent those
  // events died before storing them: the backend's replay of them is not sent again.
  relay.clientHasThrough(afterSeq);
  let mailbox: string[] = [];
  if (meta.kind === 'get') {
    t.ctx.streams.add(relay);
    // The client resumes its own stream: take it over from whichever replica had it.
    mailbox = (await guardState(() => claimStandalone(t.ctx.coordinator, relay, true, t.request.log))).mailbox;
  } else {
    holdWhileDetached(t.ctx.coordinator, relay, t.request.log);
  }
  const writer = openedWriter ?? openWriter(t);
  for (const e of events) if (e.seq > afterSeq && e.data !== undefined) writer.message(e.data, eventId(streamId, e.seq));
  if (known.ended) {
    relay.stop();
    writer.end();
    return;
  }
  return continueFromBackend(t, relay, writer, known.backendEventId, mailbox);
}

/** Connects a relay to the backend's GET stream (fresh, or resumed at `backendEventId`). */
async function continueFromBackend(t: StreamTarget, relay: StreamRelay, writer: SseWriter | undefined, backendEventId: string | undefined, mailbox: string[] = []): Promise<FastifyReply | void> {
  if (relay.meta.kind === 'post' && !backendEventId) {
    // The backend's stream cannot be resumed: the open requests get an error instead of silence.
    t.ctx.streams.add(relay);
    relay.attach(writer ?? openWriter(t));
    relay.fail(new BackendError(t.backend.name, 'stream_broken', `backend "${t.backend.name}" stream was lost and cannot be resumed`));
    return;
  }
  // A backend with third-party auth needs the user's token on its GET stream too. Without
  // one the stream is the gateway's own (as for a 405), which is where the client hears
  // that the account got linked.
  // A session whose backend session waits for the link has no backend stream to join yet.
  let authorization: string | undefined;
  if (Boolean(t.backend.config.upstreamAuth)) {
    if (t.session.link) return gatewayOnlyStream(t, relay, writer, mailbox);
    authorization = await t.ctx.upstream.linkedAuthorization(principalOf(t.request), t.backend.config).catch(() => undefined);
    if (!authorization) return gatewayOnlyStream(t, relay, writer, mailbox);
  }
  let res: BackendResponse;
  try {
    res = await getBackendStream(t, relay, { lastEventId: backendEventId, authorization });
  } catch (err) {
    if (!(err instanceof BackendError)) throw err;
    return failBeforeStreaming(t, relay, writer, err);
  }
  const streaming = res.status === 200 && res.contentType === 'text/event-stream';
  t.request.log.debug({ status: res.status, streaming, backendEventId }, 'backend GET stream answered');
  if (!streaming) {
    await res.body.dump().catch(() => {});
    relay.backendIdle();
  }
  // A 404 says the backend forgot its session only when a session was named; to a GET without
  // one (a stateless server, which issues none) it says there is no standalone stream, as 405.
  const noStandalone = res.status === 405 || (res.status === 404 && t.session.backendSessionId === undefined);
  if (res.status === 404 && !noStandalone) {
    // The backend forgot its session: ours is useless too, and the client must start over.
    relay.stop();
    writer?.end();
    await endLostBackendSession(t.ctx, t.request, t.reply, t.backend.name, t.sessionId);
    return;
  }
  if (res.status === 401 && authorization) {
    // The token was refused; the next request will start an elicitation. Keep the stream ours.
    await t.ctx.upstream.forget(principalOf(t.request), t.backend.config).catch(() => undefined);
    return gatewayOnlyStream(t, relay, writer, mailbox);
  }
  if (!streaming && !noStandalone) {
    return failBeforeStreaming(t, relay, writer, new BackendError(t.backend.name, 'bad_status', `backend "${t.backend.name}" answered GET with HTTP ${res.status}`, res.status));
  }
  t.ctx.streams.add(relay);
  if (writer) relay.attach(writer);
  else relay.attach(openWriter(t), undefined, wantsPriming(t.protocolVersion));
  if (relay.meta.kind === 'get') forgetRequestHeaders(t.request);
  // Notifications that waited for the session while it had no stream.
  for (const data of mailbox) relay.inject(data);
  // 405 (or 404 without a session): the backend has no standalone stream; ours stays open for gateway notifications.
  if (!streaming) return;
  if (relay.meta.kind === 'post') await pumpResuming(t, relay, res.body, authorization);
  else await relay.pump(res.body);
}

const CONFLICT_RETRIES = 10;
const CONFLICT_RETRY_MS = 200;

/**
 * Opens the backend's GET stream. A 409 means the backend still has that session's stream
 * open — typically on the replica this stream was just taken over from, which is letting go
 * — so it is asked again a few times, briefly, before the answer stands.
 */
async function getBackendStream(t: StreamTarget, relay: StreamRelay, headers: { lastEventId?: string; authorization?: string }): Promise<BackendResponse> {
  for (let attempt = 0; ; attempt++) {
    const caller = callerOf(t.request, t.sessionId, t.session.clientCapabilities);
    const res = await t.backend.get({ sessionId: t.session.backendSessionId, protocolVersion: t.protocolVersion, ...headers, caller }, relay.signal);
    if (res.status !== 409 || relay.meta.kind !== 'get' || attempt >= CONFLICT_RETRIES) return res;
    await res.body.dump().catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, CONFLICT_RETRY_MS));
  }
}

/** A stream with no backend behind it: gateway notifications and keep-alives only. */
function gatewayOnlyStream(t: StreamTarget, relay: StreamRelay, writer: SseWriter | undefined, mailbox: string[]): void {
  t.ctx.streams.add(relay);
  if (writer) relay.attach(writer);
  else relay.attach(openWriter(t), undefined, wantsPriming(t.protocolVersion));
  if (relay.meta.kind === 'get') forgetRequestHeaders(t.request);
  for (const data of mailbox) relay.inject(data);
}

/**
 * A standalone stream has asked the backend for its own stream: nothing reads the request's
 * headers again, yet Node keeps the request, and with it every header value, for as long as
 * the stream stays open — the client's bearer token too, which need not outlive its check —
 * about 1 KiB per idle stream (issue 29). They are dropped, as raw list and as parsed record.
 * A POST stream keeps them: resuming its backend stream forwards them again.
 */
function forgetRequestHeaders(request: FastifyRequest): void {
  request.raw.rawHeaders = [];
  request.raw.headers = {};
}

/**
 * The backend could not give us its stream. A fresh GET gets 502/504; a resumed stream that
 * already replayed events ends with JSON-RPC errors for the requests it still owes.
 */
function failBeforeStreaming(t: StreamTarget, relay: StreamRelay, writer: SseWriter | undefined, error: BackendError): FastifyReply | void {
  if (!writer) {
    relay.stop();
    return sendBackendError(t.reply, error, [], false);
  }
  t.ctx.streams.add(relay);
  relay.attach(writer);
  relay.fail(error);
}

/** Ends a client session whose backend session is gone; answers 404 unless a stream is already open. */
export async function endLostBackendSession(ctx: McpContext, request: FastifyRequest, reply: FastifyReply, backend: string, sessionId: string): Promise<void> {
  request.log.warn('backend session expired; ending the client session');
  ctx.metrics.sessionsEnded.inc({ backend, reason: 'backend_lost' });
  ctx.streams.stopSession(principalOf(request).userKey, sessionId);
  await ctx.sessions.remove(principalOf(request), sessionId).catch(() => {});
  if (!reply.sent && !reply.raw.headersSent) await sendSessionNotFound(reply);
}

function sendConflict(reply: FastifyReply): FastifyReply {
  return sendJsonRpcError(reply, 409, ErrorCode.InvalidRequest, 'Conflict: this session already has an open GET stream');
}

/** Store or coordination failures become StateUnavailableError (→ 503). */
async function guardState<T>(operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    throw err instanceof StateUnavailableError ? err : new StateUnavailableError(err);
  }
}

function summarize(events: StoredEvent[]): { lastSeq: number; backendEventId?: string; ended: boolean } {
  let lastSeq = 0;
  let backendEventId: string | undefined;
  let ended = false;
  for (const e of events) {
    lastSeq = Math.max(lastSeq, e.seq);
    if (e.backendEventId) backendEventId = e.backendEventId;
    if (e.end) ended = true;
  }
  return { lastSeq, backendEventId, ended };
}

/** A resumed POST stream still owes only the responses it has not delivered yet. */
function remainingMeta(meta: StreamMeta, events: StoredEvent[]): StreamMeta {
  if (meta.kind !== 'post') return meta;
  const answered = new Set(events.flatMap((e) => (e.data === undefined ? [] : answeredIdKeys(e.data))));
  return { kind: 'post', requestIds: meta.requestIds.filter((id) => !answered.has(idKey(id))) };
}
