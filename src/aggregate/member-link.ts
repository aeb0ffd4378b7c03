/**
 * A member of an aggregated session that waited for the user's link (SPEC §8 "Linking") joins
 * for real once the user has a token: on the first message that needs it (a list or a call
 * of that backend), on whichever replica, the gateway initializes the backend with the
 * client's capabilities and `clientInfo`, sends `notifications/initialized`, and stores the
 * member's session in the session record. One replica does it (a claim); the others wait
 * for the record to show the member.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Principal } from '../auth/principal.js';
import type { McpBackend } from '../backends/backend.js';
import type { LinkingContext } from '../linking/linking.js';
import { joinMember } from './initialize.js';
import type { AggregateCall, Members } from './members.js';
import { decodeAggregateState, encodeAggregateState, type AggregateState, type MemberSession } from './session-map.js';
import { ValueKeys } from '../state/value-keys.js';

const WAIT_POLL_MS = 100;

/**
 * Applies `change` to the aggregated session's stored state; the new state, or undefined
 * when the session has ended (an update never revives it).
 */
export async function updateAggregateState(ctx: LinkingContext, principal: Pick<Principal, 'userKey'>, sessionId: string, aggregateName: string, change: (state: AggregateState) => void): Promise<AggregateState | undefined> {
  const record = await ctx.sessions.find(principal, sessionId, aggregateName);
  if (!record) return undefined;
  const state = decodeAggregateState(record.backendSessionId);
  change(state);
  const updated = await ctx.sessions.update(principal, sessionId, { ...record, backendSessionId: encodeAggregateState(state) });
  return updated ? state : undefined;
}

/** Ends a backend session nobody will use (its client session ended while it was opened). */
export async function abandonMemberSession(members: Members, call: AggregateCall, backend: McpBackend, session: MemberSession): Promise<void> {
  if (!session.sessionId) return;
  const authorization = await members.tokenIfAny(call.caller, backend);
  await backend
    .delete({ sessionId: session.sessionId, protocolVersion: session.protocolVersion, authorization })
    .then((res) => res.body.dump())
    .catch(() => {});
}

export class MemberLinker {
  constructor(
    private readonly ctx: LinkingContext,
    private readonly members: Members,
    private readonly aggregateName: string,
  ) {}

  /**
   * The member's own session once the user's token opened it (also written into
   * `call.map`), or undefined while the account is still not linked.
   */
  async open(call: AggregateCall, name: string, backend: McpBackend): Promise<MemberSession | undefined> {
    const { principal, sessionId } = call.caller;
    if (!sessionId) return undefined;
    const claim = ValueKeys.memberLinkOpen(principal.userKey, sessionId, name);
    const holdMs = backend.config.timeout + 5_000;
    if (!(await this.ctx.store.putValueIfAbsent(claim, '1', holdMs))) return this.#waitForOther(call, name, claim, holdMs);
    try {
      const stored = await this.#storedMember(call, name);
      if (stored && !stored.pending) return (call.map[name] = stored);
      const initialize = {
        jsonrpc: '2.0' as const,
        id: 'switchboard-link',
        method: 'initialize',
        params: { protocolVersion: call.map[name]?.protocolVersion, capabilities: call.caller.clientCapabilities ?? {}, clientInfo: call.state.clientInfo },
      };
      const joined = await joinMember(this.members, call, backend, initialize);
      if (joined.session.pending) return undefined;
      await this.members.sendInitialized(call, backend, joined.session);
      const state = await updateAggregateState(this.ctx, principal, sessionId, this.aggregateName, (s) => {
        s.members[name] = joined.session;
      });
      if (!state) {
        await abandonMemberSession(this.members, call, backend, joined.session);
        return undefined;
      }
      call.caller.log.info({ backend: name }, 'backend joined the aggregated session after the account was linked');
      return (call.map[name] = joined.session);
    } finally {
      await this.ctx.store.deleteValue(claim).catch(() => false);
    }
  }

  async #storedMember(call: AggregateCall, name: string): Promise<MemberSession | undefined> {
    const { principal, sessionId } = call.caller;
    const record = await this.ctx.store.touchSession(principal.userKey, sessionId!, this.ctx.config.sessions.idleTtl);
    return record && record.backend === this.aggregateName ? decodeAggregateState(record.backendSessionId).members[name] : undefined;
  }

  async #waitForOther(call: AggregateCall, name: string, claim: string, holdMs: number): Promise<MemberSession | undefined> {
    const deadline = Date.now() + holdMs;
    while (Date.now() < deadline) {
      await sleep(WAIT_POLL_MS);
      const stored = await this.#storedMember(call, name);
      if (!stored) return undefined;
      if (!stored.pending) {
        this.ctx.sessions.forget(call.caller.principal.userKey, call.caller.sessionId!);
        return (call.map[name] = stored);
      }
      if ((await this.ctx.store.getValue(claim)) === undefined) return undefined;
    }
    return undefined;
  }
}
