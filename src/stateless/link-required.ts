/**
 * URL-mode linking in the stateless era (issue 15; MCP 2026-07-28 "Multi Round-Trip
 * Requests", "Elicitation" §URL mode). The 2025-11-25 way — error -32042 with an
 * `elicitationId`, then `notifications/elicitation/complete` — is gone from this revision: a
 * request that needs the user's account answers an `input_required` result whose
 * `inputRequests` holds one URL-mode `elicitation/create` (the connect page of SPEC §4), with a
 * sealed `requestState` (request-state.ts). The client opens the URL, the user links the
 * account in the browser, and the client retries; the retry's state is verified, the vault
 * consulted, and the original request forwarded — or answered with another round.
 *
 * `server/discover` is answered from what the gateway knows without the user's token (the
 * catalog's tokenless `initialize`, or a minimal result offering tools), as a 2025 client's
 * `initialize` is: a client discovers before it calls, and must learn of the link by calling.
 *
 * Only `tools/call`, `prompts/get` and `resources/read` may answer `input_required` (MRTR
 * §Supported Requests). A client that did not declare `elicitation.url` gets the link as text,
 * as in the 2025 era (connect/elicitation-replies.ts), since a server must not send input
 * requests the client cannot take (MRTR §Server Requirements 7).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { principalOf } from '../auth/authenticate.js';
import type { McpBackend } from '../backends/backend.js';
import { elicitationRequiredMessages, supportsUrlElicitation } from '../connect/elicitation-replies.js';
import { connectUrl } from '../connect/elicitations.js';
import { CATALOG_LISTS } from '../linking/catalog.js';
import { provisionalInitializeResult, provisionalList } from '../linking/provisional.js';
import { discoverFromInitialize } from './discover.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import type { StatelessContext } from './context.js';
import { shapeMessage } from './result-shaping.js';

/** The key of the gateway's own input request: namespaced, so it never meets a backend's keys. */
export const LINK_INPUT_KEY = 'io.switchboard/link';

/** The requests that may carry an `input_required` answer (MRTR §Supported Requests). */
export const MRTR_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read']);

export interface UnlinkedCall {
  ctx: StatelessContext;
  request: FastifyRequest;
  reply: FastifyReply;
  backend: McpBackend;
  id: JsonRpcId;
  method: string;
  params: Record<string, unknown> | undefined;
  clientCapabilities: Record<string, unknown>;
}

/** Answers a request for a backend whose account is not linked: lists from the catalog, calls with the link. */
export async function answerUnlinkedStateless(call: UnlinkedCall): Promise<FastifyReply> {
  const { ctx, request, reply, backend, id, method } = call;
  request.mcpOutcome = 'answered_by_gateway';
  if (method in CATALOG_LISTS) {
    const result = await provisionalList(backend.config, ctx.linking.catalog, method);
    return reply.code(200).type('application/json').send(shapeMessage({ jsonrpc: '2.0', id, result }, method, false));
  }
  if (method === 'server/discover') {
    // Discovery never needs the account (issue 42 cause 11): what the catalog knows without the user's token, as initialize answers a 2025 client.
    const result = discoverFromInitialize(provisionalInitializeResult(backend.config, await ctx.linking.catalog.initialize(backend.config), undefined));
    return reply.code(200).type('application/json').send({ jsonrpc: '2.0', id, result });
  }
  const provider = backend.config.upstreamAuth!.provider;
  const elicitation = await ctx.upstream.elicit(principalOf(request), backend.config, undefined);
  if (!MRTR_METHODS.has(method) || !supportsUrlElicitation(call.clientCapabilities)) {
    const [answer] = elicitationRequiredMessages([{ jsonrpc: '2.0', id, method }], elicitation, ctx.config.publicUrl, false);
    return reply.code(200).type('application/json').send(shapeMessage(answer as unknown as Record<string, unknown>, method, false));
  }
  const message = `Connect your ${provider} account to use "${backend.name}".`;
  const result = {
    resultType: 'input_required',
    inputRequests: { [LINK_INPUT_KEY]: { method: 'elicitation/create', params: { mode: 'url', message, url: connectUrl(ctx.config.publicUrl, elicitation.id) } } },
    requestState: ctx.requestStates.seal({ userKey: principalOf(request).userKey, endpoint: backend.name }, method, call.params, { purpose: `link:${provider}` }),
  };
  return reply.code(200).type('application/json').send({ jsonrpc: '2.0', id, result });
}

/** The user declined or cancelled the link in the retry's answer: nothing to forward; say so where the model can read it. */
export function declinedLink(reply: FastifyReply, id: JsonRpcId, method: string, provider: string): FastifyReply {
  reply.request.mcpOutcome = 'answered_by_gateway';
  const text = `The user did not connect their ${provider} account, so this request cannot be served.`;
  if (method === 'tools/call') {
    return reply.code(200).type('application/json').send({ jsonrpc: '2.0', id, result: { resultType: 'complete', content: [{ type: 'text', text }], isError: true } });
  }
  return reply.code(200).type('application/json').send(errorResponse(id, ErrorCode.AccountLinkRequired, text));
}
