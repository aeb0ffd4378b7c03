/**
 * How a client learns that an account must be linked (SPEC §4 step 2):
 *
 * A step-up link (a backend's 403 `insufficient_scope`) says that more access is asked for.
 *
 * - clients that declared `elicitation.url`: JSON-RPC error -32042 (URLElicitationRequired,
 *   MCP 2025-11-25 "Elicitation" §"URL Elicitation Required Error") with the connect URL;
 * - form-only clients: the same link as text they can show — a `tools/call` gets a tool
 *   result with `isError: true` (shown to the model and user), any other request a JSON-RPC
 *   error whose message carries the link — so the feature is never invisible to them.
 */
import { connectUrl, type Elicitation } from './elicitations.js';
import { ErrorCode, errorResponse, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';

/** Whether the client declared URL-mode elicitation in `initialize` (2025-11-25 capabilities). */
export function supportsUrlElicitation(capabilities: Record<string, unknown> | undefined): boolean {
  const elicitation = capabilities?.elicitation as Record<string, unknown> | undefined;
  return Boolean(elicitation && typeof elicitation === 'object' && elicitation.url !== undefined);
}

export function elicitationRequiredMessages(requests: ReadonlyArray<JsonRpcMessage & { id: JsonRpcId }>, elicitation: Elicitation, publicUrl: string, urlMode: boolean): JsonRpcMessage[] {
  const url = connectUrl(publicUrl, elicitation.id);
  const message = elicitation.scopes
    ? `"${elicitation.backend}" needs more access to your ${elicitation.provider} account (${elicitation.scopes.join(' ')}). Connect it again to grant it.`
    : `Connect your ${elicitation.provider} account to use "${elicitation.backend}".`;
  return requests.map((request) => {
    if (urlMode) {
      return errorResponse(request.id, ErrorCode.UrlElicitationRequired, message, { elicitations: [{ mode: 'url', elicitationId: elicitation.id, url, message }] });
    }
    const text = `${message} Open ${url} in your browser, sign in and approve, then retry.`;
    if (request.method === 'tools/call') return { jsonrpc: '2.0', id: request.id, result: { content: [{ type: 'text', text }], isError: true } };
    return errorResponse(request.id, ErrorCode.AccountLinkRequired, text, { url, elicitationId: elicitation.id });
  });
}
