/**
 * A standalone stream that had no backend behind it joins the backend's once there is one:
 * a `/mcp/{backend}` session that waited for the user's link (SPEC §8 "Linking") held the
 * gateway's own stream (notifications only) while the backend refused it; when the backend
 * session is opened (linking/backend-session.ts), every replica hears that the record
 * changed, and the one holding that stream opens the backend's GET into it. Server requests
 * the backend sends on its standalone stream then reach the client without a reconnect.
 */
import type { SessionContext } from './context.js';

export async function joinBackendStream(ctx: SessionContext, userKey: string, sessionId: string): Promise<void> {
  const relay = ctx.streams.standalone(userKey, sessionId);
  if (!relay || relay.finished || relay.hasBackend) return;
  const record = await ctx.store.touchSession(userKey, sessionId, ctx.config.sessions.idleTtl);
  const backend = record && ctx.backends.get(record.backend);
  // Aggregated sessions (`*`) merge member streams per GET; they are not joined here.
  if (!record || !backend || record.link || !record.backendSessionId) return;
  const authorization = backend.config.upstreamAuth ? await ctx.upstream.linkedAuthorization({ userKey }, backend.config).catch(() => undefined) : undefined;
  if (backend.config.upstreamAuth && !authorization) return;
  const res = await backend.get({ sessionId: record.backendSessionId, protocolVersion: record.protocolVersion, authorization }, relay.signal);
  if (res.status !== 200 || res.contentType !== 'text/event-stream' || relay.finished || relay.hasBackend) {
    await res.body.dump().catch(() => {});
    return;
  }
  await relay.pump(res.body);
}
