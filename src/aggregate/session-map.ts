/**
 * What an aggregated session remembers, stored as the session record's `backendSessionId`
 * (opaque to the rest of the MCP layer), so every replica can route the session's messages
 * with no other lookup:
 * - each member backend's own session id, the revision it negotiated and the capabilities it
 *   declared;
 * - the backends the user may use that could not join at initialize (down or slow then),
 *   which are tried again later, with the client's `clientInfo` to introduce it;
 * - the capabilities announced to the client (which `list_changed` notifications it expects).
 */
export interface MemberSession {
  /** The backend's Mcp-Session-Id (absent for stateless backends). */
  sessionId?: string;
  protocolVersion: string;
  /** Names of the server capabilities the backend declared (tools, prompts, resources, …). */
  capabilities: string[];
  /**
   * The backend refused to join without the user's token (SPEC §8 "Linking"): it has no
   * session yet, the gateway answers for it from its catalog, and it joins for real once the
   * account is linked. Its capabilities are the catalog's.
   */
  pending?: boolean;
}

export type SessionMap = Record<string, MemberSession>;

export interface AggregateState {
  members: SessionMap;
  left: string[];
  clientInfo?: unknown;
  announced: string[];
}

type CompactMember = { s?: string; v: string; c: string[]; p?: 1 };

export function encodeAggregateState(state: AggregateState): string {
  const m = Object.fromEntries(Object.entries(state.members).map(([name, x]) => [name, { s: x.sessionId, v: x.protocolVersion, c: x.capabilities, ...(x.pending ? { p: 1 as const } : {}) }]));
  return Buffer.from(JSON.stringify({ m, l: state.left, i: state.clientInfo, a: state.announced })).toString('base64url');
}

/** Throws on anything that is not a state this module wrote. */
export function decodeAggregateState(value: string | undefined): AggregateState {
  if (!value) return { members: {}, left: [], announced: [] };
  const raw = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as { m?: Record<string, CompactMember>; l?: string[]; i?: unknown; a?: string[] };
  // Sessions made before the state had fields (a rolling upgrade) hold the member map alone.
  // (An old map with a backend named "m" has a member there, with its revision in `v`.)
  if (!raw.m || typeof (raw.m as { v?: unknown }).v === 'string') return { members: toMembers(raw as Record<string, CompactMember>), left: [], announced: [] };
  return { members: toMembers(raw.m), left: raw.l ?? [], clientInfo: raw.i, announced: raw.a ?? [] };
}

function toMembers(compact: Record<string, CompactMember>): SessionMap {
  return Object.fromEntries(Object.entries(compact).map(([name, x]) => [name, { sessionId: x.s, protocolVersion: x.v, capabilities: x.c, ...(x.p ? { pending: true } : {}) }]));
}
