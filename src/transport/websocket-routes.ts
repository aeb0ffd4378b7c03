/**
 * The WebSocket face of the MCP endpoints (SPEC §1, §2): `GET /ws/mcp/{backend}` and
 * `GET /ws/mcp` (the aggregated endpoint), with `@fastify/websocket`.
 *
 * The upgrade request goes through the normal Fastify lifecycle before any upgrade, so the
 * same `onRequest` hooks as `/mcp…` judge it — Host/Origin (421/403), then the bearer token
 * from the Authorization header (401 with the same `WWW-Authenticate`, or 403), then the
 * backend's access policy (403) — and a refusal is a plain HTTP answer to the handshake. Then: an unknown backend is 404, a
 * handshake that does not offer the subprotocol `mcp` (the one the SDK's
 * WebSocketClientTransport asks for) is 400, and a GET without an upgrade is 426.
 * A frame larger than `limits.maxBodyBytes` closes the connection with 1009 (ws
 * `maxPayload`), as the same body would be 413 over HTTP.
 *
 * After the upgrade, websocket-bridge.ts carries each connection over the HTTP endpoint, and
 * bridged-clients.ts makes each of its loopback requests the client's: its address (after
 * `listen.trustProxy`) and its upgrade request's headers, as the HTTP path has them.
 */
import { Gauge } from 'prom-client';
import fastifyWebsocket from '@fastify/websocket';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { WebSocket } from 'ws';
import type { Config } from '../config/schema.js';
import { ErrorCode } from '../wire/jsonrpc.js';
import { sendJsonRpcError } from '../http/replies.js';
import { createBackendAccessGuard } from '../policy/backend-guard.js';
import { BRIDGE_HEADER, type BridgedClients } from './bridged-clients.js';
import { Loopback } from './loopback.js';
import { WebSocketBridge } from './websocket-bridge.js';

/** The subprotocol of MCP over WebSocket (SDK `WebSocketClientTransport`). */
export const MCP_SUBPROTOCOL = 'mcp';

export interface WebSocketRouteHooks {
  originGuard: onRequestHookHandler;
  authenticate: onRequestHookHandler;
}

type WsRequest = FastifyRequest<{ Params: { backend?: string } }>;

/** True when a Sec-WebSocket-Protocol header offers `mcp`. */
export function offersMcp(header: string | string[] | undefined): boolean {
  const values = Array.isArray(header) ? header : header ? [header] : [];
  return values.some((v) => v.split(',').some((p) => p.trim() === MCP_SUBPROTOCOL));
}

/** `clients` must have been attached (`clients.attach(app)`) before the `/mcp…` routes were declared. */
export async function registerWebSocketTransport(app: FastifyInstance, config: Config, hooks: WebSocketRouteHooks, clients: BridgedClients): Promise<void> {
  const loopback = new Loopback(app.server);
  const bridges = new Set<WebSocketBridge>();
  const accessGuard = createBackendAccessGuard(app.mcp);
  // Sessions and streams behind a connection are counted where they live; this is the sockets.
  new Gauge({
    name: 'switchboard_websocket_connections_open',
    help: 'MCP WebSocket connections this replica holds now',
    registers: [app.metrics.registry],
    collect() {
      this.set(bridges.size);
    },
  });

  await app.register(fastifyWebsocket, {
    options: {
      maxPayload: config.limits.maxBodyBytes,
      handleProtocols: (protocols) => (protocols.has(MCP_SUBPROTOCOL) ? MCP_SUBPROTOCOL : false),
    },
    // ws closes the connection itself on protocol errors (1002, 1007, 1009); only log them.
    errorHandler: (error, socket, request) => {
      request.log.info({ err: error.message }, 'WebSocket error');
      if (socket.readyState === socket.OPEN) socket.terminate();
    },
    // Instead of the plugin's plain close(): 1001 and no session DELETE (the endpoint refuses
    // requests while closing); the sessions expire after `sessions.idleTtl`.
    preClose: async () => {
      await Promise.allSettled([...bridges].map((b) => b.shutdown()));
      app.websocketServer.close();
    },
  });

  const checkHandshake = async (request: WsRequest, reply: FastifyReply) => {
    const { backend } = request.params;
    // The live set (a config reload adds and removes backends, src/reload/), and the virtual servers.
    if (backend !== undefined && !app.mcp.backends.has(backend) && !app.mcp.virtualServers.has(backend)) {
      return sendJsonRpcError(reply, 404, ErrorCode.InvalidRequest, `No backend named "${backend}"`);
    }
    if (request.ws && !offersMcp(request.headers['sec-websocket-protocol'])) {
      return sendJsonRpcError(reply, 400, ErrorCode.InvalidRequest, `Bad Request: the WebSocket handshake must offer the subprotocol "${MCP_SUBPROTOCOL}"`);
    }
  };
  const upgradeRequired = async (_request: WsRequest, reply: FastifyReply) => {
    reply.header('upgrade', 'websocket');
    return sendJsonRpcError(reply, 426, ErrorCode.InvalidRequest, `Upgrade Required: open a WebSocket with the subprotocol "${MCP_SUBPROTOCOL}"`);
  };
  const open = (socket: WebSocket, request: WsRequest) => {
    const { backend } = request.params;
    // The client's address and headers, for every loopback request of this connection.
    const token = clients.admit(request);
    const bridge = new WebSocketBridge({
      socket,
      loopback,
      path: backend === undefined ? '/mcp' : `/mcp/${encodeURIComponent(backend)}`,
      // Both were checked by the hooks above; they go back to the same gateway, not to a backend.
      headers: { authorization: request.headers.authorization!, host: request.headers.host!, [BRIDGE_HEADER]: token },
      log: request.log,
    });
    bridges.add(bridge);
    socket.once('close', () => {
      bridges.delete(bridge);
      // After the session's DELETE, the connection's last loopback request.
      void bridge.end().finally(() => clients.release(token));
    });
    request.log.info('WebSocket connection opened');
  };

  for (const url of ['/ws/mcp', '/ws/mcp/:backend']) {
    app.route<{ Params: { backend?: string } }>({
      method: 'GET',
      url,
      // The backend's access policy too (403, -32015), as on `/mcp/{backend}`: refused before the upgrade.
      onRequest: [hooks.originGuard, hooks.authenticate, accessGuard],
      preHandler: checkHandshake,
      handler: upgradeRequired,
      wsHandler: open,
    });
  }
  app.addHook('onClose', () => loopback.close());
}
