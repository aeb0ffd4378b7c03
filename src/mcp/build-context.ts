/**
 * Builds the MCP layer's context once, bottom up, with nothing filled in later: the session
 * layer (sessions/context.ts) with the browser flow's upstream authorization, then the
 * linking over it, what the stateless era adds (backend revisions, request states), then the
 * aggregated endpoint `/mcp` over all. The browser flow
 * (connect/) and the linking reach back only through the functions they are given —
 * `notify` and `afterLink` — which close over what is built after them; they run on requests,
 * never during construction.
 */
import type { FastifyInstance } from 'fastify';
import { AggregatedBackend } from '../aggregate/aggregated-backend.js';
import { VirtualServer } from '../aggregate/virtual-server.js';
import { registerBrowserFlows } from '../connect/browser-flows.js';
import type { ClientNameOf } from '../connect/approval-routes.js';
import { DiscoveryBackend } from '../discovery/discovery-backend.js';
import type { McpBackend } from '../backends/backend.js';
import type { BackendEras } from '../backends/era.js';
import type { ServerConfig } from '../config/servers-schema.js';
import { Linking, type LinkingContext } from '../linking/linking.js';
import type { SessionContext } from '../sessions/context.js';
import { notifySession } from '../sessions/session-notifier.js';
import { BridgeReplicas } from '../stateless/bridge-replicas.js';
import { LegacyStreams } from '../stateless/legacy-streams.js';
import { PARK_TTL_MS, ParkedCalls } from '../stateless/parked-calls.js';
import { RequestStates } from '../stateless/request-state.js';
import type { McpContext } from './context.js';

export type SessionParts = Omit<SessionContext, 'upstream'>;

/**
 * @param eras which revision each backend speaks: built with the backends (app.ts), whose 2026-era adapter asks it too.
 * @param clientName the broker's registered client names, for the approval page (browser-flows.ts); absent without the broker.
 */
export function buildMcpContext(app: FastifyInstance, parts: SessionParts, eras: BackendEras, clientName?: ClientNameOf): McpContext {
  const upstream = registerBrowserFlows(app, { ...parts, clientName }, {
    notify: (userKey, sessionId, data) => notifySession(sessions, userKey, sessionId, data),
    afterLink: (link) => linking.linked(link),
  });
  const sessions: SessionContext = { ...parts, upstream };
  const linking = new Linking(sessions, app.log);
  const linked: LinkingContext = { ...sessions, linking };
  return { ...linked, eras, requestStates: new RequestStates(parts.config.secrets.tokenKey), parkedCalls: new ParkedCalls(PARK_TTL_MS, () => parts.config.stateless.maxParkedPerUser), bridgeReplicas: new BridgeReplicas(), legacyStreams: new LegacyStreams(parts.coordinator, { checkEveryMs: parts.config.streams.keepAlive }), ...aggregatedEndpoints(linked, parts) };
}

/**
 * `/mcp` and the virtual servers, each under the tool-search face (issue 31 §3,
 * discovery/discovery-backend.ts): `/mcp`'s threshold is read from the live config (a reload
 * turns it on or off); a virtual server's is its entry's, rebuilt when a reload changes it.
 */
function aggregatedEndpoints(linked: LinkingContext, parts: SessionParts): Pick<McpContext, 'aggregate' | 'virtualServers'> {
  const { config } = parts;
  const aggregate = new DiscoveryBackend(new AggregatedBackend(linked), () => config.discovery?.threshold, linked.store);
  const virtualServers = new Map(config.servers.map((s, i) => [s.name, virtualServerEndpoint(linked, s, i)]));
  return { aggregate, virtualServers };
}

/**
 * One virtual server as it is served: under the tool-search face when its entry has
 * `discovery`. The one way it is built, at start and when a reload adds or changes it
 * (reload/server-set.ts), so a reloaded server keeps its tool search.
 */
export function virtualServerEndpoint(linked: LinkingContext, server: ServerConfig, index: number): McpBackend {
  const virtual = new VirtualServer(linked, server, index);
  return server.discovery ? new DiscoveryBackend(virtual, () => server.discovery?.threshold, linked.store) : virtual;
}
