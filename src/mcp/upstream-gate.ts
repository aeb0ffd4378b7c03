/**
 * Where the MCP layer meets third-party authorization (SPEC §4): for a backend with
 * `upstreamAuth`, find the Authorization header to send it, or answer the client with the
 * elicitation it must complete first. Backends without `upstreamAuth` pass straight through.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { BackendConfig } from '../config/schema.js';
import type { Elicitation } from '../connect/elicitations.js';
import { elicitationRequiredMessages, supportsUrlElicitation } from '../connect/elicitation-replies.js';
import type { McpContext } from './context.js';
import type { JsonRpcId, JsonRpcMessage } from './jsonrpc.js';
import { BackendError } from '../backends/errors.js';
import { ProviderError } from '../connect/provider-client.js';
import { sendBackendError, sendStateUnavailable } from './replies.js';

export type OpenRequest = JsonRpcMessage & { id: JsonRpcId };

export interface GateInput {
  backend: BackendConfig;
  /**
   * With no linked account, let the message through without a token instead of asking at
   * once; the backend's 401, if it needs one, starts the elicitation. Used for `initialize`,
   * so that a session can exist (and later hear `notifications/elicitation/complete`) on
   * backends that admit unauthenticated initialization.
   */
  tryWithoutToken?: boolean;
  /** The gateway session to notify on completion (none during initialize). */
  sessionId: string | undefined;
  requests: readonly OpenRequest[];
  capabilities: Record<string, unknown> | undefined;
  batch: boolean;
}

/**
 * The header to send, `{}` for backends without third-party auth, or undefined when the
 * client has been answered already (an elicitation is needed, or state is unavailable).
 */
export async function upstreamAuthorization(ctx: McpContext, request: FastifyRequest, reply: FastifyReply, input: GateInput): Promise<{ authorization?: string } | undefined> {
  const config = input.backend;
  if (!config.upstreamAuth || !ctx.upstream) return {};
  let decision;
  try {
    decision = await ctx.upstream.authorize(request.principal!, config, input.sessionId);
  } catch (err) {
    request.log.warn({ err: (err as Error).message, provider: config.upstreamAuth.provider }, 'third-party token unavailable');
    if (err instanceof ProviderError) {
      // The provider could not refresh the token: the backend side is unavailable, not us.
      sendBackendError(reply, new BackendError(config.name, err.kind === 'timeout' ? 'timeout' : 'unreachable', `the ${config.upstreamAuth.provider} account could not be refreshed right now`), input.requests.map((r) => r.id), input.batch);
    } else {
      sendStateUnavailable(reply);
    }
    return undefined;
  }
  if ('authorization' in decision) return decision;
  if (input.tryWithoutToken) {
    await ctx.upstream.discard(decision.elicitation);
    return {};
  }
  replyWithElicitation(ctx, reply, input, decision.elicitation);
  return undefined;
}

/** The backend refused the third-party token (401): forget it and elicit again. */
export async function backendRefusedToken(ctx: McpContext, request: FastifyRequest, reply: FastifyReply, input: GateInput): Promise<FastifyReply> {
  const config = input.backend;
  request.log.info({ provider: config.upstreamAuth!.provider }, 'backend refused the third-party token; asking the user to link the account again');
  const elicitation = await ctx.upstream!.rejected(request.principal!, config, input.sessionId);
  return replyWithElicitation(ctx, reply, input, elicitation);
}

export function hasUpstreamAuth(ctx: McpContext, backend: BackendConfig): boolean {
  return Boolean(ctx.upstream && backend.upstreamAuth);
}

function replyWithElicitation(ctx: McpContext, reply: FastifyReply, input: GateInput, elicitation: Elicitation): FastifyReply {
  // Notifications and responses carry nothing to answer: they wait with the user.
  if (!input.requests.length) return reply.code(202).send();
  const messages = elicitationRequiredMessages(input.requests, elicitation, ctx.config.publicUrl, supportsUrlElicitation(input.capabilities));
  return reply.code(200).type('application/json').send(input.batch ? messages : messages[0]);
}
