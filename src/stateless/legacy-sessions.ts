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

export interface LegacySession {
  /** The backend's session id (absent when the backend keeps none). */
  backendSessionId?: string;
  protocolVersion: string;
  /** The backend's initialize result: what `server/discover` is made from. */
  initialize: Record<string, unknown>;
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
 * none or `fresh` (the stored one was lost).
 */
export function legacySession(input: LegacySessionInput, fresh = false): LegacySession | Promise<LegacySession> {
  const capabilities = JSON.stringify(input.clientCapabilities);
  // The in-process key needs no digest: the store's key (a SHA-256 per call) is made only on a miss.
  const nearKey = `${input.caller.principal.userKey}\n${input.backend.name}\n${capabilities}${input.lane ? `\n${input.lane}` : ''}`;
  const held = fresh ? undefined : nearSessions(input.ctx.store).get(nearKey);
  return held ?? sessionFromStore(input, fresh, nearKey, capabilities);
}

async function sessionFromStore(input: LegacySessionInput, fresh: boolean, nearKey: string, capabilities: string): Promise<LegacySession> {
  const near = nearSessions(input.ctx.store);
  const key = () => storeKey(input, capabilities);
  if (!fresh) {
    const stored = await input.ctx.store.getValue(key());
    if (stored) return near.set(nearKey, JSON.parse(stored) as LegacySession);
  } else {
    near.delete(nearKey);
    await input.ctx.store.deleteValue(key());
  }
  return near.set(nearKey, await openAndShare(input, key()));
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

/** Opens a session and stores it, unless another replica stored one first (then ours ends). */
async function openAndShare(input: LegacySessionInput, key: string): Promise<LegacySession> {
  const opened = await openLegacySession(input);
  const ttl = input.ctx.config.sessions.idleTtl;
  if (await input.ctx.store.putValueIfAbsent(key, JSON.stringify(opened), ttl)) return opened;
  // Another replica stored one first: use it, end ours.
  const theirs = await input.ctx.store.getValue(key);
  if (!theirs) return opened;
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
