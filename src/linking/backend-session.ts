/**
 * Opening the backend session of a `/mcp/{backend}` session that waited for the user's link
 * (SPEC §8 "Linking"), behind the client's back: the gateway initializes the backend with
 * the client's own revision, capabilities and `clientInfo` and the user's new token, sends
 * `notifications/initialized`, and stores the backend's session id in the session record.
 * The client noticed nothing but a `list_changed`; its next message reaches the real backend.
 *
 * Any replica may do it, on whichever message comes first; one does (a claim in the store)
 * and the others wait for the record to change, so a backend never gets two sessions for
 * one client session.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { BackendCaller, McpBackend } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import { initializeBackend } from '../backends/initialize-backend.js';
import type { SessionContext } from '../sessions/context.js';
import type { SessionRecord } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

export interface LinkedSessionInput {
  ctx: SessionContext;
  backend: McpBackend;
  caller: BackendCaller & { sessionId: string };
  record: SessionRecord;
  authorization: string;
  trace: { traceparent?: string; tracestate?: string };
}

/** How long a replica waits for another one that is opening the same session. */
const WAIT_POLL_MS = 100;

/**
 * The record with the backend session in it; undefined when the backend refused the token
 * (it is forgotten, and the session goes on waiting for a link). Throws BackendError when
 * the backend cannot be reached or answers wrongly.
 */
export async function openBackendSession(input: LinkedSessionInput): Promise<SessionRecord | undefined> {
  const { ctx, caller } = input;
  const claim = ValueKeys.linkOpen(caller.principal.userKey, caller.sessionId);
  const holdMs = input.backend.config.timeout + 5_000;
  if (!(await ctx.store.putValueIfAbsent(claim, '1', holdMs))) return waitForOther(ctx, caller, input.backend.name, claim, holdMs);
  try {
    // Another replica may have finished just before our claim.
    const fresh = await ctx.store.touchSession(caller.principal.userKey, caller.sessionId, ctx.config.sessions.idleTtl);
    if (!fresh) return undefined;
    if (!fresh.link) return fresh;
    return await initializeNow({ ...input, record: fresh });
  } finally {
    await ctx.store.deleteValue(claim).catch(() => false);
  }
}

async function initializeNow(input: LinkedSessionInput): Promise<SessionRecord | undefined> {
  const { ctx, backend, caller, record, authorization, trace } = input;
  const params = { protocolVersion: record.protocolVersion, capabilities: record.clientCapabilities, clientInfo: record.link?.clientInfo ?? { name: 'switchboard', version: '0.1.0' } };
  const opened = await initializeBackend(backend, params, { authorization, trace, caller, id: 'switchboard-link' });
  if (opened === 'unauthorized') {
    await ctx.upstream.forget(caller.principal, backend.config);
    return undefined;
  }
  const { backendSessionId } = opened;
  // Opened with the user's token: nothing of its answer goes into the catalog (linking/catalog.ts).
  const { link: _done, ...rest } = record;
  const updated: SessionRecord = { ...rest, backendSessionId };
  if (!(await ctx.sessions.update(caller.principal, caller.sessionId, updated))) {
    // The client ended its session meanwhile: end the backend's too.
    if (backendSessionId) await backend.delete({ sessionId: backendSessionId, protocolVersion: record.protocolVersion, authorization }).then((r) => r.body.dump(), () => {});
    return undefined;
  }
  caller.log.info({ backend: backend.name }, 'backend session opened after the account was linked');
  return updated;
}

async function waitForOther(ctx: SessionContext, caller: LinkedSessionInput['caller'], backend: string, claim: string, holdMs: number): Promise<SessionRecord | undefined> {
  const deadline = Date.now() + holdMs;
  while (Date.now() < deadline) {
    await sleep(WAIT_POLL_MS);
    const record = await ctx.store.touchSession(caller.principal.userKey, caller.sessionId, ctx.config.sessions.idleTtl);
    if (!record || record.backend !== backend) return undefined;
    if (!record.link) {
      ctx.sessions.forget(caller.principal.userKey, caller.sessionId);
      return record;
    }
    // The other replica gave up (the backend refused the token): still unlinked.
    if ((await ctx.store.getValue(claim)) === undefined) return undefined;
  }
  throw new BackendError(backend, 'timeout', `backend "${backend}" session is still being opened; retry`);
}
