/**
 * Ends sessions evicted under `sessions.maxPerUser` (issue 13; least recently used and idle
 * first, issue 28 §7: the store decides, state/redis-scripts.ts CREATE_SESSION) as a DELETE would (MCP
 * 2025-11-25 "Transports" §"Session Management"), once the store has already removed their
 * records (session-service.ts): their streams stop — here, and the standalone stream on
 * whichever replica holds it — and the backend session is ended, best effort. The client of
 * an evicted session then meets 404 and starts a new session, as the spec has it for any
 * session the server ended.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Principal } from '../auth/principal.js';
import type { EvictedSession, SessionRecord } from '../state/store.js';
import type { McpContext } from './context.js';

/** Ends each evicted session in the background; failures are logged, never thrown. */
export function endEvictedSessions(ctx: McpContext, principal: Principal, evicted: readonly EvictedSession[], log: FastifyBaseLogger): void {
  for (const { sessionId, record } of evicted) {
    log.info({ backend: record.backend, maxPerUser: ctx.config.sessions.maxPerUser }, 'session ended: its user opened more than sessions.maxPerUser sessions (the least recently used idle one goes; one in use only when none is idle)');
    ctx.metrics.sessionsEnded.inc({ backend: record.backend, reason: 'evicted' });
    void endEvicted(ctx, principal, sessionId, record, log).catch((err: Error) => log.warn({ backend: record.backend, err: err.message }, 'could not end everything of an evicted session'));
  }
}

async function endEvicted(ctx: McpContext, principal: Principal, sessionId: string, record: SessionRecord, log: FastifyBaseLogger): Promise<void> {
  const { userKey } = principal;
  ctx.streams.stopSession(userKey, sessionId);
  const holder = await ctx.coordinator.standaloneHolder(userKey, sessionId).catch(() => undefined);
  if (holder && holder.replicaId !== ctx.coordinator.replicaId) {
    await ctx.coordinator.send(holder.replicaId, { type: 'stop', userKey, sessionId, streamId: holder.streamId });
  }
  if (!record.backendSessionId) return;
  const backend = ctx.aggregate?.name === record.backend ? ctx.aggregate : (ctx.backends.get(record.backend) ?? ctx.virtualServers.get(record.backend));
  if (!backend) return;
  const authorization = Boolean(backend.config.upstreamAuth) ? await ctx.upstream.linkedAuthorization(principal, backend.config).catch(() => undefined) : undefined;
  const caller = { principal, sessionId, clientCapabilities: record.clientCapabilities, log };
  const res = await backend.delete({ sessionId: record.backendSessionId, protocolVersion: record.protocolVersion, authorization, caller });
  await res.body.dump();
  if (res.status >= 400 && res.status !== 404 && res.status !== 405) log.warn({ backend: backend.name, status: res.status }, 'backend refused to end an evicted session');
}
