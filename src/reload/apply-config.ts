/**
 * Applying a validated config to the running gateway (issue 32 §1; docs/operations-reload.md).
 * The new file is judged against the one applied last, as a whole, before anything changes:
 *
 * - the same config → `unchanged` (a watcher also fires for files it does not care about);
 * - a restart-only key changed (restart-keys.ts) → `needs_restart`, and NOTHING is applied:
 *   the file describes one state, and running half of it (say, the new backends under the old
 *   `publicUrl`) would be a gateway no file describes; the operator rolls the pods instead;
 * - otherwise → `applied`: the config's contents are replaced (config/live-config.ts), the
 *   backend clients follow (backend-set.ts) and the log level changes.
 *
 * Sessions of backends the reload does not touch are not touched. A removed backend's streams
 * on this replica end with `retry` as their last event, and its sessions then meet 404 ("No
 * backend named …") on their next request, as a client expects of a session the server ended.
 * A backend pointed at another server (url, transport, command, args, env, protocol) is a
 * removal and an addition: the same, then the next `initialize` reaches the new server. An
 * added backend joins existing `/mcp` sessions on their next message (aggregate/rejoin.ts).
 * Virtual servers follow the same way (server-set.ts), and sessions whose lists lost a member
 * or whose server changed are told `list_changed` on their open stream (list-changes.ts).
 * The tool-search lists this replica keeps for the endpoints the reload may have changed are
 * forgotten, so a tool it hid is not found by `search_tools` (list-changes.ts); a reload that
 * loosens `policy`, a backend's `access` or `pinning` is logged at `warn` naming each item
 * (loosening.ts; issue 41 §6).
 */
import { isDeepStrictEqual } from 'node:util';
import type { FastifyBaseLogger } from 'fastify';
import type { McpBackend } from '../backends/backend.js';
import type { BackendEras } from '../backends/era.js';
import { replaceConfig } from '../config/live-config.js';
import type { Config } from '../config/schema.js';
import type { SessionService } from '../sessions/session-service.js';
import type { StreamRegistry } from '../streams/stream-registry.js';
import { backendChanges, buildBackend, hasBackendChanges, type BackendChanges, type BackendParts } from './backend-set.js';
import { announceListChanges, forgetChangedSearchLists } from './list-changes.js';
import { looseningsOf, reportLoosenings } from './loosening.js';
import { applyServerChanges, hasServerChanges, serverChanges, type ServerParts } from './server-set.js';
import { restartOnlyChanges, withRunningRestartKeys } from './restart-keys.js';

export type ReloadOutcome = 'applied' | 'unchanged' | 'invalid' | 'needs_restart';

export interface LiveGateway {
  /** The config object every component holds (`app.mcp.config`). */
  config: Config;
  /** The backend clients every component holds (`app.mcp.backends`). */
  backends: Map<string, McpBackend>;
  parts: BackendParts;
  /** `/mcp`'s endpoint (`app.mcp.aggregate`), whose tool-search lists a reload may have to forget. */
  aggregate: McpBackend;
  /** The virtual servers every component holds (`app.mcp.virtualServers`) and how one is built. */
  servers: ServerParts;
  sessions: SessionService;
  streams: StreamRegistry;
  eras: BackendEras;
  log: FastifyBaseLogger;
}

export type ConfigApplier = (next: Config) => ReloadOutcome;

/** @param loaded the config as the file gave it at start (before anything filled in defaults of its own). */
export function createConfigApplier(live: LiveGateway, loaded: Config): ConfigApplier {
  let applied = loaded;
  return (next) => {
    if (isDeepStrictEqual(applied, next)) {
      live.log.info('config reload: the file is unchanged');
      return 'unchanged';
    }
    const restart = restartOnlyChanges(applied, next);
    if (restart.length) {
      live.log.warn({ keys: restart }, `config reload: needs restart: ${restart.join(', ')} cannot change while running; nothing of the new file was applied, the old config keeps serving`);
      return 'needs_restart';
    }
    const changes = backendChanges(applied, next);
    const servers = serverChanges(applied, next);
    const loosened = looseningsOf(applied, next);
    replaceConfig(live.config, withRunningRestartKeys(live.config, next));
    if (hasBackendChanges(changes)) applyBackendChanges(live, changes);
    if (hasServerChanges(servers)) applyServerChanges(live.servers, live.config.servers, servers, live.streams);
    announceListChanges(live, { removedBackends: changes.removed, changedServers: servers.changed, servers: new Set(live.servers.servers.keys()) });
    forgetChangedSearchLists({ aggregate: live.aggregate, servers: live.servers.servers }, live.config, { policy: !isDeepStrictEqual(applied.policy, next.policy), backends: new Set(Object.values(changes).flat()) });
    reportLoosenings(live.log, live.parts.metrics, loosened);
    live.log.level = next.log.level;
    applied = next;
    live.log.info({ backends: changes, servers }, 'config reloaded');
    return 'applied';
  };
}

/** Makes `live.backends` follow `live.config.backends`, in configuration order, in one synchronous step. */
function applyBackendChanges(live: LiveGateway, changes: BackendChanges): void {
  const old = new Map(live.backends);
  const rebuilt = new Set([...changes.added, ...changes.changed, ...changes.moved]);
  const next = live.config.backends.map((b) => [b.name, rebuilt.has(b.name) ? buildBackend(b, live.parts) : old.get(b.name)!] as const);
  live.backends.clear();
  for (const [name, backend] of next) live.backends.set(name, backend);
  for (const name of [...changes.removed, ...changes.moved]) {
    live.streams.stopBackend(name);
    live.eras.forget(name);
  }
  // Requests under way finish on the client they started with (undici closes gracefully).
  for (const name of [...changes.removed, ...changes.changed, ...changes.moved]) {
    void old.get(name)!.close().catch((err: Error) => live.log.warn({ backend: name, err: err.message }, 'could not close the client of a backend the reload replaced'));
  }
}
