/**
 * A held call told to a 2026-07-28 client (issue 46 §2; MCP 2026-07-28 "Multi Round-Trip
 * Requests", "Elicitation" §URL mode): the revision has no -32042 any more, so the call is
 * answered with an `input_required` result whose one input request is a URL-mode
 * `elicitation/create` of the approval page, and the gateway's own sealed `requestState`
 * (stateless/request-state.ts, the machinery account linking uses) whose purpose names the
 * approval. The client opens the URL, the person decides on the page, and the client resends
 * the call with its `requestState`; stateless/stateless-post.ts opens it (bound to the user,
 * the endpoint and the request, so a tampered or foreign one is refused), takes the answer to
 * this input request out, and sends the call on, where the approval bound to it in the store
 * (approvals.ts) lets it through once — on any replica. The state names the approval; the
 * store decides: a state never approves anything by itself.
 *
 * Never form mode: a client could fill a form in by itself (issue 46 §2).
 */
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';

/** The key of the gateway's approval input request: namespaced, so it never meets a backend's keys (as linking's). */
export const APPROVAL_INPUT_KEY = 'io.switchboard/approval';

const PURPOSE = 'approval:';

/** The sealed state's purpose for a held call: the approval it waits for. */
export function approvalPurpose(approvalId: string): string {
  return PURPOSE + approvalId;
}

/** The approval a state's purpose names, or undefined when the state was issued for something else. */
export function approvalOfPurpose(purpose: string): string | undefined {
  return purpose.startsWith(PURPOSE) ? purpose.slice(PURPOSE.length) : undefined;
}

/** The `input_required` answer: one URL-mode elicitation of the page, and the sealed state. */
export function approvalInputRequired(id: JsonRpcId, url: string, message: string, requestState: string): JsonRpcMessage {
  const inputRequests = { [APPROVAL_INPUT_KEY]: { method: 'elicitation/create', params: { mode: 'url', message, url } } };
  return { jsonrpc: '2.0', id, result: { resultType: 'input_required', inputRequests, requestState } };
}

/** The answer when the user declined or cancelled opening the page: the call did not run; its request still waits on the page until it expires. */
export function approvalDeclined(id: JsonRpcId): JsonRpcMessage {
  const text = 'The approval page was not opened, so this call did not run. It can still be approved on its page until it expires; then retry the call.';
  return { jsonrpc: '2.0', id, result: { resultType: 'complete', content: [{ type: 'text', text }], isError: true } };
}
