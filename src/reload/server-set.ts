/**
 * Virtual servers (`servers`, issue 31 §1) on a reload (issue 32 §1 "What reloads: virtual
 * servers"; docs/operations-reload.md). The one `Map` of virtual servers every component holds
 * (`ctx.virtualServers`: the routes, the WebSocket upgrade, the eviction) is changed in place,
 * like the backends' (backend-set.ts), so `/mcp/{name}` follows on the next request; the RFC
 * 9728 documents and accepted audiences follow on their own (auth/resources.ts
 * `namedEndpoints()` is read through `derived`).
 *
 * - **added** → served at once, on its next request;
 * - **removed** → its streams on this replica end with `retry` as their last event and its
 *   sessions meet 404 on their next request (no endpoint of that name), as a removed backend's;
 * - **changed** (members, names, descriptions, fixed arguments) → a new server object under
 *   the same name. Its sessions are kept, not ended: a virtual server's session is the
 *   aggregated session of its members (aggregate/session-map.ts), so a member it no longer
 *   names is simply not routed to any more, a member it now names joins on the session's next
 *   message (aggregate/rejoin.ts), and the lists are narrowed by the new selection on the next
 *   `tools/list`. The client is told with `list_changed` (list-changes.ts), which MCP
 *   2025-11-25 "Tools" → "List Changed Notification" exists for. Ending them instead would cut
 *   every client of the server (streams, parked calls) for what is, to the client, a change
 *   of its lists.
 */
import { isDeepStrictEqual } from 'node:util';
import type { McpBackend } from '../backends/backend.js';
import type { Config } from '../config/schema.js';
import type { ServerConfig } from '../config/servers-schema.js';
import type { StreamRegistry } from '../streams/stream-registry.js';

export interface ServerParts {
  /** `ctx.virtualServers`, changed in place. */
  servers: Map<string, McpBackend>;
  /** One virtual server over the live backends (aggregate/virtual-server.ts). */
  build(server: ServerConfig, index: number): McpBackend;
}

export interface ServerChanges {
  added: string[];
  removed: string[];
  changed: string[];
}

export function serverChanges(current: Config, next: Config): ServerChanges {
  const before = new Map(current.servers.map((s) => [s.name, s]));
  const after = new Set(next.servers.map((s) => s.name));
  const out: ServerChanges = { added: [], removed: current.servers.filter((s) => !after.has(s.name)).map((s) => s.name), changed: [] };
  for (const s of next.servers) {
    const was = before.get(s.name);
    if (!was) out.added.push(s.name);
    else if (!isDeepStrictEqual(was, s)) out.changed.push(s.name);
  }
  return out;
}

export function hasServerChanges(c: ServerChanges): boolean {
  return c.added.length + c.removed.length + c.changed.length > 0;
}

/** Makes `parts.servers` follow `servers` (the applied config's), in configuration order, in one synchronous step. */
export function applyServerChanges(parts: ServerParts, servers: readonly ServerConfig[], changes: ServerChanges, streams: StreamRegistry): void {
  const rebuilt = new Set([...changes.added, ...changes.changed]);
  const next = servers.map((s, i) => [s.name, rebuilt.has(s.name) ? parts.build(s, i) : parts.servers.get(s.name)!] as const);
  parts.servers.clear();
  for (const [name, server] of next) parts.servers.set(name, server);
  for (const name of changes.removed) streams.stopBackend(name);
}
