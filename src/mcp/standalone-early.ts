/**
 * The session's standalone stream, opened by the gateway before its client asks (issue 13).
 *
 * A server sends requests that belong to no client request — `sampling/createMessage` or
 * `elicitation/create` made with `server.request()` and no `relatedRequestId` in the SDK —
 * on its standalone GET stream, and drops them when none is open (MCP 2025-11-25
 * "Transports" §"Listening for Messages from the Server": the server MAY send them there,
 * and nothing keeps them). A client's first `tools/call` often reaches the backend before
 * the client's own GET has made it through the gateway to the backend, and the call hangs.
 *
 * So once `notifications/initialized` has gone through, the gateway opens the backend's GET
 * stream itself, as the session's standalone stream (the cluster-wide claim), and keeps what
 * arrives — in the relay and its replay log — until the client's GET comes:
 * - on this replica, the client's writer is attached to it and gets everything kept;
 * - on another replica, that replica takes the single-use "awaiting" marker, tells this one,
 *   and follows the stream over the store (stream-follow.ts), losing nothing; when that
 *   client leaves, this replica is told to stop, as a GET relay stops when its client goes.
 * A client that never comes lets it lapse after {@link AWAIT_CLIENT_MS}.
 */
import type { StreamHolder } from '../state/coordinator.js';
import { callerOf } from '../backends/caller.js';
import { wantsPriming } from '../wire/protocol.js';
import { followRemoteStream } from '../streams/stream-follow.js';
import { claimStandalone, LEASE_TTL_MS } from '../streams/stream-leases.js';
import { eventId, StreamRelay } from '../streams/stream-relay.js';
import { newStreamId, openWriter, relayContext, resumeFromStore, STANDALONE_META, streamKey, type StreamTarget } from './stream-service.js';
import { principalOf } from '../auth/authenticate.js';
import { ValueKeys } from '../state/value-keys.js';

/** How long a stream opened ahead waits for its client before it is closed. */
export const AWAIT_CLIENT_MS = 2 * 60_000;

const awaitingKey = ValueKeys.standaloneAwaiting;

/**
 * Opens the backend's standalone stream for a session that was just initialized, unless the
 * session already has one (here or anywhere), the backend offers none, or it needs a token
 * the user does not have. Returns once the backend has accepted the GET, so the client's
 * next request cannot reach the backend before the stream does.
 */
export async function openStandaloneEarly(t: StreamTarget): Promise<void> {
  const { ctx, request } = t;
  const userKey = principalOf(request).userKey;
  if (t.session.link || ctx.streams.standalone(userKey, t.sessionId)) return;
  if (ctx.streams.size >= ctx.config.streams.maxOpen || ctx.streams.forUser(userKey) >= ctx.config.streams.maxPerUser) return;
  if (await ctx.coordinator.standaloneHolder(userKey, t.sessionId)) return;
  let authorization: string | undefined;
  if (Boolean(t.backend.config.upstreamAuth)) {
    authorization = await ctx.upstream.linkedAuthorization(principalOf(request), t.backend.config).catch(() => undefined);
    if (!authorization) return;
  }
  const controller = new AbortController();
  const res = await t.backend.get({ sessionId: t.session.backendSessionId, protocolVersion: t.protocolVersion, authorization, caller: callerOf(request, t.sessionId, t.session.clientCapabilities) }, controller.signal);
  if (res.status !== 200 || res.contentType !== 'text/event-stream') {
    await res.body.dump().catch(() => {});
    return;
  }
  const relay = new StreamRelay(relayContext(t), streamKey(t, newStreamId()), STANDALONE_META);
  ctx.streams.add(relay);
  const claim = await claimStandalone(ctx.coordinator, relay, false, request.log).catch(() => ({ granted: false, mailbox: [] as string[] }));
  if (!claim.granted) {
    // The client's own GET got there first: that one is the session's stream.
    relay.stop();
    res.body.destroy();
    return;
  }
  relay.signal.addEventListener('abort', () => controller.abort(), { once: true });
  for (const data of claim.mailbox) relay.inject(data);
  await waitForClient(t, relay);
  request.log.debug({ streamId: relay.key.streamId }, 'standalone stream opened ahead of its client');
  void relay.pump(res.body).catch((err: Error) => request.log.warn({ err: err.message }, 'standalone stream opened ahead failed'));
}

/** Keeps the relay findable by a client on any replica until one comes, or lets it lapse. */
async function waitForClient(t: StreamTarget, relay: StreamRelay): Promise<void> {
  const { ctx } = t;
  const { userKey, sessionId, streamId } = relay.key;
  await ctx.store.putValue(awaitingKey(userKey, sessionId), streamId, AWAIT_CLIENT_MS);
  // Held while it lives, so that a follower elsewhere knows this replica still reads it.
  const hold = () => void ctx.coordinator.holdStream(relay.key, LEASE_TTL_MS).catch(() => {});
  hold();
  const renew = setInterval(hold, LEASE_TTL_MS / 3);
  renew.unref();
  const lapse = setTimeout(() => {
    if (!relay.awaitingClient) return;
    t.request.log.info('no client came for the standalone stream opened ahead; closing it');
    relay.stop();
  }, AWAIT_CLIENT_MS);
  lapse.unref();
  relay.awaitClient(() => clearTimeout(lapse));
  relay.onFinish(() => {
    clearInterval(renew);
    clearTimeout(lapse);
    void ctx.coordinator.releaseStream(relay.key).catch(() => {});
    void ctx.store.deleteValueIf(awaitingKey(userKey, sessionId), streamId).catch(() => {});
  });
}

/** The client's GET landed where the stream opened ahead runs: it gets everything kept so far. */
export function attachAwaiting(t: StreamTarget, relay: StreamRelay): void {
  void t.ctx.store.deleteValueIf(awaitingKey(relay.key.userKey, relay.key.sessionId), relay.key.streamId).catch(() => {});
  relay.attach(openWriter(t), undefined, wantsPriming(t.protocolVersion));
}

/**
 * The client's GET landed on another replica than the stream opened ahead: follow it there.
 * False when the holder's stream is not one awaiting its client (then the GET is a second
 * one for the session, and gets 409).
 */
export async function followAwaiting(t: StreamTarget, holder: StreamHolder | undefined): Promise<boolean> {
  const { ctx, request } = t;
  const userKey = principalOf(request).userKey;
  if (!holder || holder.replicaId === ctx.coordinator.replicaId) return false;
  // Single use: of two GETs racing for it, one follows and the other gets 409.
  if ((await ctx.store.deleteValueIf(awaitingKey(userKey, t.sessionId), holder.streamId)) !== true) return false;
  const { streamId, replicaId } = holder;
  await ctx.coordinator.send(replicaId, { type: 'followed', userKey, sessionId: t.sessionId, streamId });
  const writer = openWriter(t);
  if (wantsPriming(t.protocolVersion)) writer.prime(eventId(streamId, 0), ctx.config.streams.retry);
  // As a GET relay stops when its client goes, the stream followed stops when this client goes.
  writer.onClose(() => void ctx.coordinator.send(replicaId, { type: 'stop', userKey, sessionId: t.sessionId, streamId }).catch(() => {}));
  request.log.debug({ streamId, holder: replicaId }, 'following the standalone stream opened ahead on another replica');
  await followRemoteStream({ coordinator: ctx.coordinator, store: ctx.store, key: streamKey(t, streamId), log: request.log }, writer, 0, (w, lastSeq) =>
    resumeFromStore(t, streamId, lastSeq, w),
  );
  return true;
}
