/**
 * The gateway's own sessions toward a backend of the 2025-11-25 era, for clients of the
 * stateless era (issue 15, "Bridging: 2026 client → 2025-11-25 backend"). A 2026 client has no
 * session; the backend needs one. So the gateway opens it — `initialize` with the client's
 * capabilities and `clientInfo` from `_meta`, then `notifications/initialized` — and keeps its
 * id in the store, per user, backend and capability set (a backend may answer differently to
 * clients that can sample or elicit), where every replica finds it. A lost session (the
 * backend forgot it: 404) is opened again silently by the caller.
 *
 * Two replicas opening the same one at once keep the first stored; the other ends its own.
 * On one replica, calls that find the same session missing at once wait for one opening.
 *
 * Bounded (issue 28 §5): each session takes one of the user's `stateless.maxSessionsPerUser`
 * slots (session-budget.ts) and is kept `stateless.sessionTtl`; past the bound, opening one
 * throws SessionBudgetSpent.
 *
 * Lanes: calls running at once in one backend session could not tell whose a request on the
 * session's GET stream is (SDK servers send one there when they name no call), so a call that
 * finds its session busy on this replica takes another session of the same user, backend and
 * capability set — lane 1, 2, … (legacy-bridge.ts) — stored and reused like the first.
 */
import { createHash } from 'node:crypto';
import type { BackendCaller, McpBackend } from '../backends/backend.js';
import { initializeBackend } from '../backends/initialize-backend.js';
import type { SessionContext } from '../sessions/context.js';
import { RecentValues } from '../state/recent-values.js';
import { ValueKeys } from '../state/value-keys.js';
import { LATEST_PROTOCOL_VERSION } from '../wire/protocol.js';
import { claimSlot, releaseSlot, type SessionBudget } from './session-budget.js';

export interface LegacySession {
  /** The backend's session id (absent when the backend keeps none). */
  backendSessionId?: string;
  protocolVersion: string;
  /** The backend's initialize result: what `server/discover` is made from. */
  initialize: Record<string, unknown>;
  /** The user's slot it holds (session-budget.ts); absent in a record of an earlier release. */
  slot?: number;
}

export interface LegacySessionInput {
  ctx: SessionContext;
  backend: McpBackend;
  caller: BackendCaller;
  clientCapabilities: Record<string, unknown>;
  clientInfo?: unknown;
  authorization?: string;
  trace: { traceparent?: string; tracestate?: string };
  /** Which of the sessions of this user, backend and capability set: 0 (or none) the first. */
  lane?: number;
}

const GATEWAY_CLIENT_INFO = { name: 'switchboard', version: '0.1.0' };

/**
 * The session to use: the one this replica used lately (returned as it is, not as a promise:
 * the hot path awaits nothing — `npm run bench`), the stored one, or a new one when there is
 * none or the one given as `lost` was lost (the backend forgot it: 404).
 */
export function legacySession(input: LegacySessionInput, lost?: LegacySession): LegacySession | Promise<LegacySession> {
  const capabilities = JSON.stringify(input.clientCapabilities);
  // The in-process key needs no digest: the store's key (a SHA-256 per call) is made only on a miss.
  const nearKey = `${input.caller.principal.userKey}\n${input.backend.name}\n${capabilities}${input.lane ? `\n${input.lane}` : ''}`;
  const held = lost ? undefined : nearSessions(input.ctx.store).get(nearKey);
  if (held) return held;
  const opening = openingSessions(input.ctx.store);
  let found = opening.get(nearKey);
  if (!found) {
    found = sessionFromStore(input, lost, nearKey, capabilities).finally(() => opening.delete(nearKey));
    opening.set(nearKey, found);
  }
  return found;
}

async function sessionFromStore(input: LegacySessionInput, lost: LegacySession | undefined, nearKey: string, capabilities: string): Promise<LegacySession> {
  const near = nearSessions(input.ctx.store);
  const key = storeKey(input, capabilities);
  if (!lost) {
    const stored = await input.ctx.store.getValue(key);
    if (stored) return near.set(nearKey, JSON.parse(stored) as LegacySession);
  } else {
    near.delete(nearKey);
    await forgetLost(input, key, lost);
  }
  return near.set(nearKey, await openAndShare(input, key));
}

/**
 * Removes the lost session's record and gives its slot back — unless another replica has
 * replaced it already (then its record stays, and the caller takes it).
 */
async function forgetLost(input: LegacySessionInput, key: string, lost: LegacySession): Promise<void> {
  const store = input.ctx.store;
  const stored = await store.getValue(key);
  if (!stored || (JSON.parse(stored) as LegacySession).backendSessionId !== lost.backendSessionId) return;
  if ((await store.deleteValueIf(key, stored)) && lost.slot !== undefined) await releaseSlot(budgetOf(input), lost.slot, key);
}

/** Openings under way on this replica, so calls that find a session missing at once open it once. */
const openingByStore = new WeakMap<object, Map<string, Promise<LegacySession>>>();

function openingSessions(store: object): Map<string, Promise<LegacySession>> {
  let opening = openingByStore.get(store);
  if (!opening) openingByStore.set(store, (opening = new Map()));
  return opening;
}

function budgetOf(input: LegacySessionInput): SessionBudget {
  const { maxSessionsPerUser, sessionTtl } = input.ctx.config.stateless;
  return { store: input.ctx.store, userKey: input.caller.principal.userKey, max: maxSessionsPerUser, ttlMs: sessionTtl };
}

/**
 * The sessions this replica used lately, so that a stateless call costs no store round trip
 * (the 2025 path has its session cache too; `npm run bench`, issue 15). Held briefly: a session
 * another replica replaced is found lost (404) and reopened, which the caller already does.
 * One map per store, so two gateways in one process never share one.
 */
const NEAR_MS = 60_000;
const NEAR_MAX = 10_000;
const nearByStore = new WeakMap<object, RecentValues<LegacySession>>();

function nearSessions(store: object): RecentValues<LegacySession> {
  let near = nearByStore.get(store);
  if (!near) nearByStore.set(store, (near = new RecentValues(NEAR_MS, NEAR_MAX)));
  return near;
}

/**
 * Opens a session in a slot of the user's and stores it, unless another replica stored one first
 * (then ours ends and its slot is given back; so is the slot of a session that could not be opened).
 */
async function openAndShare(input: LegacySessionInput, key: string): Promise<LegacySession> {
  const budget = budgetOf(input);
  const slot = await claimSlot(budget, key);
  let opened: LegacySession;
  try {
    opened = { ...(await openLegacySession(input)), slot };
  } catch (err) {
    await releaseSlot(budget, slot, key);
    throw err;
  }
  if (await input.ctx.store.putValueIfAbsent(key, JSON.stringify(opened), budget.ttlMs)) return opened;
  const theirs = await input.ctx.store.getValue(key);
  if (!theirs) {
    await input.ctx.store.putValue(key, JSON.stringify(opened), budget.ttlMs);
    return opened;
  }
  // Another replica stored one first: use it, end ours.
  await releaseSlot(budget, slot, key);
  if (opened.backendSessionId) {
    await input.backend.delete({ sessionId: opened.backendSessionId, protocolVersion: opened.protocolVersion, authorization: input.authorization }).then((r) => r.body.dump(), () => {});
  }
  return JSON.parse(theirs) as LegacySession;
}

function storeKey(input: LegacySessionInput, capabilities: string): string {
  const digest = createHash('sha256').update(input.lane ? `${capabilities}\n${input.lane}` : capabilities).digest('base64url').slice(0, 22);
  return ValueKeys.legacyBridgeSession(input.caller.principal.userKey, input.backend.name, digest);
}

async function openLegacySession(input: LegacySessionInput): Promise<LegacySession> {
  const { backend, authorization, trace, caller } = input;
  const params = { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: input.clientCapabilities, clientInfo: input.clientInfo ?? GATEWAY_CLIENT_INFO };
  const opened = await initializeBackend(backend, params, { authorization, trace, caller, id: 'switchboard-bridge' });
  if (opened === 'unauthorized') throw new LegacySessionRefused(backend.name);
  return { backendSessionId: opened.backendSessionId, protocolVersion: opened.protocolVersion, initialize: opened.result };
}

/** The backend refused the user's token while the gateway opened its session (the caller leads the user to a new link). */
export class LegacySessionRefused extends Error {
  constructor(readonly backend: string) {
    super(`backend "${backend}" refused the token on initialize`);
  }
}
