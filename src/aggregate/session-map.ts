/**
 * What an aggregated session remembers about each backend it joined: the backend's own
 * session id, the protocol revision that backend negotiated, and which capabilities it
 * offered. It is stored as the session record's `backendSessionId` (opaque to the rest of
 * the MCP layer), so every replica can route the session's messages with no other lookup.
 */
export interface MemberSession {
  /** The backend's Mcp-Session-Id (absent for stateless backends). */
  sessionId?: string;
  protocolVersion: string;
  /** Names of the server capabilities the backend declared (tools, prompts, resources, …). */
  capabilities: string[];
}

export type SessionMap = Record<string, MemberSession>;

export function encodeSessionMap(map: SessionMap): string {
  const compact = Object.fromEntries(Object.entries(map).map(([name, m]) => [name, { s: m.sessionId, v: m.protocolVersion, c: m.capabilities }]));
  return Buffer.from(JSON.stringify(compact)).toString('base64url');
}

/** Throws on anything that is not a map this module wrote. */
export function decodeSessionMap(value: string | undefined): SessionMap {
  if (!value) return {};
  const compact = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Record<string, { s?: string; v: string; c: string[] }>;
  return Object.fromEntries(Object.entries(compact).map(([name, m]) => [name, { sessionId: m.s, protocolVersion: m.v, capabilities: m.c }]));
}
