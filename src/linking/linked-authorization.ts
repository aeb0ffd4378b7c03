/**
 * The user's own token for a backend with `upstreamAuth` (SPEC §4), as every route that
 * forwards to one needs it: the 2025-11-25 session routes (mcp/upstream-gate.ts) and the
 * stateless 2026-07-28 ones (stateless/). A provider that cannot refresh the token right now is
 * the backend's failure, not the client's; a store that is away is a 503.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { principalOf } from '../auth/authenticate.js';
import { BackendError } from '../backends/errors.js';
import type { BackendConfig } from '../config/schema.js';
import { sendBackendError, sendStateUnavailable } from '../http/replies.js';
import { ProviderError } from '../providers/provider-client.js';
import type { SessionContext } from '../sessions/context.js';
import type { JsonRpcId } from '../wire/jsonrpc.js';

/**
 * The user's Authorization header for the backend (`undefined` inside when none is linked),
 * or undefined after answering the client: the provider could not refresh the token now (a
 * backend failure, not the client's), or the state store is away.
 */
export async function linkedAuthorization(ctx: SessionContext, request: FastifyRequest, reply: FastifyReply, backend: BackendConfig, requestIds: readonly JsonRpcId[], batch: boolean): Promise<{ authorization?: string } | undefined> {
  if (!Boolean(backend.upstreamAuth)) return {};
  try {
    return { authorization: await ctx.upstream.linkedAuthorization(principalOf(request), backend) };
  } catch (err) {
    request.log.warn({ err: (err as Error).message, provider: backend.upstreamAuth!.provider }, 'third-party token unavailable');
    if (err instanceof ProviderError) {
      sendBackendError(reply, new BackendError(backend.name, err.kind === 'timeout' ? 'timeout' : 'unreachable', `the ${backend.upstreamAuth!.provider} account could not be refreshed right now`), requestIds, batch);
    } else {
      sendStateUnavailable(reply);
    }
    return undefined;
  }
}
