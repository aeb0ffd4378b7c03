/**
 * Telling live sessions that a reload changed their lists (issue 32 §1 "Effect on clients";
 * docs/operations-reload.md): `notifications/{tools,prompts,resources}/list_changed` (MCP
 * 2025-11-25 "Tools"/"Prompts"/"Resources" → "List Changed Notification") on the standalone
 * stream of each aggregated session (`/mcp` and virtual servers) whose lists the reload
 * changed:
 *
 * - a member backend was removed: the lists that member gave the session (its declared
 *   capabilities), of those announced to the client;
 * - its virtual server was changed (another selection, names, arguments): every list announced.
 *
 * Each replica tells the streams it holds, when it applies its own file (the ConfigMap way:
 * every replica reloads on its own), so a stream on replica B hears it when B reloads. A
 * session with no standalone stream open is not told (there is nowhere to say it, and a
 * mailbox entry per session of a busy `/mcp` would be a write storm); its next list is already
 * the new one. The next lists lack a removed member because the aggregated layer routes only
 * to members that are still configured (aggregate/members.ts). An added member is announced by
 * aggregate/rejoin.ts when it joins. A 2026-07-28 client, which has no session, hears the same
 * on the `subscriptions/listen` streams it holds open here (tellListens below).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { McpBackend } from '../backends/backend.js';
import type { Config } from '../config/schema.js';
import { forgetToolSearchLists } from '../discovery/discovery-backend.js';
import { AGGREGATE_NAME } from '../aggregate/aggregated-backend.js';
import { decodeAggregateState, type AggregateState } from '../aggregate/session-map.js';
import type { SessionService } from '../sessions/session-service.js';
import type { StreamRegistry } from '../streams/stream-registry.js';
import type { StreamRelay } from '../streams/stream-relay.js';

const LISTS = ['tools', 'prompts', 'resources'] as const;

export interface ListChanges {
  /** Backends the reload removed. */
  removedBackends: readonly string[];
  /** Virtual servers the reload changed (kept under the same name). */
  changedServers: readonly string[];
  /** The virtual servers' names now configured. */
  servers: ReadonlySet<string>;
}

/** Which lists of this session changed (announced ones only: a client is told only of lists it was told may change). */
export function changedLists(endpoint: string, state: AggregateState, changes: ListChanges): string[] {
  const announced = LISTS.filter((l) => state.announced.includes(l));
  if (changes.changedServers.includes(endpoint)) return announced;
  const lost = changes.removedBackends.flatMap((b) => state.members[b]?.capabilities ?? []);
  return announced.filter((l) => lost.includes(l));
}

/** Sends the notifications on this replica's standalone streams, in the background; failures are logged. */
export function announceListChanges(parts: { streams: StreamRegistry; sessions: SessionService; log: FastifyBaseLogger }, changes: ListChanges): void {
  if (!changes.removedBackends.length && !changes.changedServers.length) return;
  tellListens(parts.streams, changes);
  for (const relay of parts.streams.standaloneStreams()) {
    if (relay.backend !== AGGREGATE_NAME && !changes.servers.has(relay.backend)) continue;
    void tell(parts.sessions, relay, changes).catch((err: Error) => parts.log.warn({ backend: relay.backend, err: err.message }, 'could not tell a session its lists changed'));
  }
}

async function tell(sessions: SessionService, relay: StreamRelay, changes: ListChanges): Promise<void> {
  const record = await sessions.find({ userKey: relay.key.userKey }, relay.key.sessionId, relay.backend);
  if (!record || relay.finished) return;
  for (const list of changedLists(relay.backend, decodeAggregateState(record.backendSessionId), changes)) {
    relay.inject(JSON.stringify({ jsonrpc: '2.0', method: `notifications/${list}/list_changed` }));
  }
}

/**
 * The same for the 2026-07-28 `subscriptions/listen` streams open here (streams/open-listens.ts),
 * each only of the lists it asked for: a changed virtual server's listens hear every list; a
 * removed member's `/mcp` listens hear every list too — a listen is not tied to a member map
 * as a session is, so it cannot know which lists that member gave it (a needless notice costs
 * the client one list and misleads nothing).
 */
function tellListens(streams: StreamRegistry, changes: ListChanges): void {
  for (const endpoint of streams.listens.endpoints()) {
    const touched = changes.changedServers.includes(endpoint) || (endpoint === AGGREGATE_NAME && changes.removedBackends.length > 0);
    if (touched) streams.listens.tell(endpoint, LISTS);
  }
}

/**
 * `notifications/tools/list_changed` on this replica's standalone streams of the sessions that
 * reach `backend`, when an operator approves a pinned tool's change (pinning/pinning.ts): its
 * own (`/mcp/{backend}`), and those of `/mcp` and of virtual servers, whose endpoint names are
 * no backend's (a virtual server without that member hears one it does not need, which costs a
 * list and misleads nothing). Each replica does it for its own streams, and for the 2026-07-28
 * listens it holds on the same endpoints that asked for `toolsListChanged` (tagged with their
 * subscription id: streams/open-listens.ts).
 */
export function announceToolsChanged(streams: StreamRegistry, config: Config, backend: string): void {
  const backends = new Set(config.backends.map((b) => b.name));
  const touches = (endpoint: string) => endpoint === backend || !backends.has(endpoint);
  const data = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  for (const relay of streams.standaloneStreams()) {
    if (!relay.finished && touches(relay.backend)) relay.inject(data);
  }
  for (const endpoint of streams.listens.endpoints()) if (touches(endpoint)) streams.listens.tell(endpoint, ['tools']);
}

/**
 * Forgets the tool-search lists (discovery/user-lists.ts) this replica keeps for the endpoints
 * the reload may have changed, and their indexes: `/mcp` and every virtual server when `policy`
 * changed (a rule may name any backend), else `/mcp` and the virtual servers offering a tool of
 * a backend that changed (its `access`, tool lists, pinning, anything). Their next search reads
 * the user's list again, through the new policy: a tool the reload hid is no longer found, where
 * before it stayed findable until the client's next `tools/list` or for up to 60 s (issue 41 §6).
 * A server the reload changed was rebuilt with no lists at all. Each replica applies its own
 * file, so each forgets its own lists.
 */
export function forgetChangedSearchLists(endpoints: { aggregate: McpBackend; servers: ReadonlyMap<string, McpBackend> }, config: Config, changed: { policy: boolean; backends: ReadonlySet<string> }): void {
  if (!changed.policy && !changed.backends.size) return;
  const offers = (s: Config['servers'][number]) => s.tools.some((t) => changed.backends.has(t.from.slice(0, t.from.indexOf('.'))));
  const servers = config.servers.filter((s) => changed.policy || offers(s)).flatMap((s) => endpoints.servers.get(s.name) ?? []);
  forgetToolSearchLists([endpoints.aggregate, ...servers]);
}
