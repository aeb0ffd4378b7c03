/**
 * Bringing back a backend that could not join an aggregated session at initialize (down or
 * slower than `aggregate.fanoutTimeout` then), and bringing in one a config reload added. Clients keep a session for hours; without this
 * a backend that was briefly away when the client connected would stay missing until the
 * client reconnects.
 *
 * While such a backend is missing, any message of the session may start an attempt, in the
 * background (the message is not held up). At most one attempt per backend per
 * `aggregate.rejoinInterval` runs in the whole cluster (a claim in the store). A backend that
 * joins is added to the session record (an update that cannot revive an ended session) and
 * the client is told with `notifications/{tools,prompts,resources}/list_changed` on its
 * session stream, on whichever replica holds it (MCP 2025-11-25 "Tools" → "List Changed
 * Notification"), for the lists it was told about.
 *
 * Two replicas adding two different backends at the same moment may overwrite each other's
 * update; the backend that lost stays on the missing list and joins again at the next attempt.
 */
import type { LinkingContext } from '../linking/linking.js';
import { notifySession } from '../sessions/session-notifier.js';
import { joinMember } from './initialize.js';
import type { AggregateCall, Members } from './members.js';
import { abandonMemberSession, updateAggregateState } from './member-link.js';
import { ValueKeys } from '../state/value-keys.js';

const LISTS = ['tools', 'prompts', 'resources'] as const;

export class Rejoiner {
  /** Sessions with an attempt running on this replica (one at a time per session). */
  readonly #running = new Set<string>();

  constructor(
    private readonly ctx: LinkingContext,
    private readonly members: Members,
    /** The session record's backend name of aggregated sessions. */
    private readonly aggregateName: string,
  ) {}

  /** Starts an attempt for the session's missing backends, unless one is running here. */
  schedule(call: AggregateCall, protocolVersion: string | undefined): void {
    const { principal, sessionId } = call.caller;
    const missing = this.#missing(call);
    if (!sessionId || !missing.length) return;
    const key = `${principal.userKey}:${sessionId}`;
    if (this.#running.has(key)) return;
    this.#running.add(key);
    void this.#attempt(call, sessionId, protocolVersion, missing)
      .catch((err: Error) => call.caller.log.warn({ err: err.message }, 'could not bring a backend into the aggregated session'))
      .finally(() => this.#running.delete(key));
  }

  /**
   * The backends the session lacks: left out at initialize, or added by a config reload since
   * (every backend the user could use then is either a member or left out), which so join
   * existing sessions too (docs/operations-reload.md).
   */
  #missing(call: AggregateCall): string[] {
    const { left } = call.state;
    const added = this.members.allowed(call.caller).filter((b) => !(b.name in call.map) && !left.includes(b.name));
    return added.length ? [...left, ...added.map((b) => b.name)] : left;
  }

  async #attempt(call: AggregateCall, sessionId: string, protocolVersion: string | undefined, missing: readonly string[]): Promise<void> {
    const { principal, log } = call.caller;
    const allowed = new Map(this.members.allowed(call.caller).map((b) => [b.name, b]));
    for (const name of missing) {
      const backend = allowed.get(name);
      if (!backend) continue;
      const claim = ValueKeys.aggregateRejoin(principal.userKey, sessionId, name);
      if (!(await this.ctx.store.putValueIfAbsent(claim, '1', this.ctx.config.aggregate.rejoinInterval))) continue;
      const initialize = {
        jsonrpc: '2.0' as const,
        id: 'switchboard-rejoin',
        method: 'initialize',
        params: { protocolVersion, capabilities: call.caller.clientCapabilities ?? {}, clientInfo: call.state.clientInfo },
      };
      let joined;
      try {
        joined = await joinMember(this.members, call, backend, initialize);
      } catch (err) {
        log.info({ backend: name, err: (err as Error).message }, 'backend still cannot join the aggregated session');
        continue;
      }
      if (!joined.session.pending) await this.members.sendInitialized(call, backend, joined.session);
      const state = await updateAggregateState(this.ctx, principal, sessionId, this.aggregateName, (s) => {
        s.members[name] = joined.session;
        s.left = s.left.filter((n) => n !== name);
      });
      if (!state) return abandonMemberSession(this.members, call, backend, joined.session);
      log.info({ backend: name }, 'backend joined the aggregated session late');
      for (const list of LISTS) {
        if (state.announced.includes(list) && joined.capabilities[list]) {
          await notifySession(this.ctx, principal.userKey, sessionId, JSON.stringify({ jsonrpc: '2.0', method: `notifications/${list}/list_changed` }));
        }
      }
    }
  }
}
