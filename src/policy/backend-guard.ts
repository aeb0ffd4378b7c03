/**
 * 403 for a backend this user may not use, on every verb of `/mcp/{backend}` (SPEC §2, §3
 * `backends[].access`). Runs after `authenticate` (which has already answered 401, or 403
 * `insufficient_scope` for a missing required scope, with its RFC 6750 challenge): what is
 * left here is tenants and claims, which no new token scope would fix, so the answer carries
 * no `WWW-Authenticate` challenge — only a JSON-RPC error the client can show.
 *
 * An unknown backend passes through untouched so the route keeps answering 404.
 */
import type { onRequestHookHandler } from 'fastify';
import type { McpBackend } from '../backends/backend.js';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import { ErrorCode } from '../wire/jsonrpc.js';
import { sendJsonRpcError } from '../http/replies.js';
import { backendAccessDenial } from './backend-access.js';

export function createBackendAccessGuard(ctx: { backends: ReadonlyMap<string, McpBackend>; config: Config; metrics: Metrics }): onRequestHookHandler {
  // A callback hook: a request let through costs no promise (issue 29); one refused is
  // answered here, and `done` is then not called.
  return function backendAccessGuard(request, reply, done): void {
    const principal = request.principal;
    if (reply.sent || !principal) return done();
    const name = (request.params as { backend?: string } | undefined)?.backend;
    const backend = name === undefined ? undefined : ctx.backends.get(name)?.config;
    if (!backend) return done();
    const denial = backendAccessDenial(principal, backend, ctx.config.auth.tenantClaim);
    if (!denial) return done();
    ctx.metrics.policyDenials.inc({ backend: backend.name, reason: denial.reason });
    // The reason, never the token or its claim values (SPEC §6: tokens are not logged).
    request.log.info({ backend: backend.name, policyDenial: denial.reason }, 'backend access denied by policy');
    request.server.audit?.refusal(request, `access.${denial.reason}s`, ErrorCode.AccessDenied);
    void sendJsonRpcError(reply, 403, ErrorCode.AccessDenied, denial.message);
  };
}
