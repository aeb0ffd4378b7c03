/**
 * DNS-rebinding protection (MCP 2025-11-25 "Transports" §"Security Warning"): a browser
 * page must not be able to talk to the gateway through a hostile name or from a foreign
 * origin. The Host header must name us (publicUrl's host or a configured extra host), and
 * an Origin, when a browser sends one, must be publicUrl's origin or an allowed one.
 * Non-browser clients send no Origin and are unaffected.
 */
import type { onRequestHookHandler } from 'fastify';
import type { Config } from '../config/schema.js';
import { headersOf } from '../wire/headers.js';
import { ErrorCode } from '../wire/jsonrpc.js';
import { sendJsonRpcError } from './replies.js';

export function allowedHostsOf(config: Config): Set<string> {
  const url = new URL(config.publicUrl);
  const hosts = new Set(config.allowedHosts);
  hosts.add(url.host.toLowerCase());
  // A default port may be written explicitly by some clients.
  if (!url.port) hosts.add(`${url.hostname}:${url.protocol === 'https:' ? 443 : 80}`.toLowerCase());
  return hosts;
}

/**
 * A callback hook, not an async one: a request that passes costs no promise (issue 29). A
 * refused request is answered here, and `done` is then not called.
 */
export function createOriginGuard(config: Config): onRequestHookHandler {
  const hosts = allowedHostsOf(config);
  const origins = new Set([new URL(config.publicUrl).origin, ...config.allowedOrigins]);
  return function originGuard(request, reply, done): void {
    const headers = headersOf(request);
    const host = headers.host;
    // Most clients write the host as it was configured: lower-cased only when it is not found.
    if (!host || !(hosts.has(host) || hosts.has(host.toLowerCase()))) {
      request.log.warn({ host: host?.toLowerCase() }, 'refused request for a host that is not ours');
      void sendJsonRpcError(reply, 421, ErrorCode.InvalidRequest, 'Misdirected request: Host header not allowed');
      return;
    }
    const origin = headers.origin;
    if (origin !== undefined && !origins.has(origin)) {
      request.log.warn({ origin }, 'refused request from a foreign origin');
      void sendJsonRpcError(reply, 403, ErrorCode.InvalidRequest, 'Forbidden: Origin not allowed');
      return;
    }
    done();
  };
}
