/**
 * Gateway-originated messages for one MCP session (e.g. `notifications/elicitation/complete`
 * once a browser flow ends, SPEC §4): delivered on the session's standalone stream on
 * whichever replica holds it — exactly once, and to that session only — or kept in the
 * session's mailbox until it opens one.
 */
import type { SessionMessage } from '../state/coordinator.js';
import type { SessionContext } from './context.js';
import { joinBackendStream } from './standalone-join.js';

const MAILBOX_TTL_MS = 10 * 60_000;
const MAILBOX_MAX = 100;

export async function notifySession(ctx: SessionContext, userKey: string, sessionId: string, data: string): Promise<'delivered' | 'sent' | 'queued'> {
  const local = ctx.streams.standalone(userKey, sessionId);
  if (local && !local.finished) {
    local.inject(data);
    return 'delivered';
  }
  const holder = await ctx.coordinator.standaloneHolder(userKey, sessionId);
  if (holder && holder.replicaId !== ctx.coordinator.replicaId) {
    await ctx.coordinator.send(holder.replicaId, { type: 'deliver', userKey, sessionId, streamId: holder.streamId, data });
    return 'sent';
  }
  await ctx.coordinator.postToMailbox(userKey, sessionId, data, MAILBOX_TTL_MS, MAILBOX_MAX);
  return 'queued';
}

/** What a replica does with a message another replica addressed to it. */
export function handleReplicaMessage(ctx: SessionContext, message: SessionMessage): void {
  if (message.type === 'ended' || message.type === 'changed') {
    ctx.sessions.forget(message.userKey, message.sessionId);
    // Streams of an ended session (deleted or evicted elsewhere) stop here too.
    if (message.type === 'ended') ctx.streams.stopSession(message.userKey, message.sessionId);
    if (message.type === 'changed') void joinBackendStream(ctx, message.userKey, message.sessionId).catch(() => {});
    return;
  }
  const relay = ctx.streams.get(message.userKey, message.sessionId, message.streamId);
  if (message.type === 'stop') {
    relay?.stop();
    return;
  }
  if (message.type === 'followed') {
    relay?.followedElsewhere();
    return;
  }
  if (relay && !relay.finished) {
    relay.inject(message.data);
    return;
  }
  // The stream ended between the lookup and the delivery: keep the message for the next one.
  void ctx.coordinator.postToMailbox(message.userKey, message.sessionId, message.data, MAILBOX_TTL_MS, MAILBOX_MAX).catch(() => {});
}
