/**
 * A `tools/call` that a `confirm` rule matched (issue 46 §1, §2, §4): it reaches the backend
 * only with an approval bound to it, which the caller gives on the gateway's own signed-in
 * page (connect/approval-routes.ts) — never through the client, so neither the client nor the
 * model can approve for the user.
 *
 * - No approval for this call yet: it is held (approvals.ts) and the client is told where to
 *   approve it, as linking tells it where to link: a client that declared `elicitation.url`
 *   gets -32042 URLElicitationRequired with the page's URL (MCP 2025-11-25 "Elicitation",
 *   §URL Elicitation Required Error); a 2026-07-28 client that declared it gets an
 *   `input_required` result with the page as a URL-mode `elicitation/create` and a sealed
 *   `requestState` naming the approval (approval-input.ts); any other gets the link as a tool
 *   result with `isError: true`, which the user sees. Form mode is never used: a client could
 *   fill a form in by itself (issue 46 §2). A retry while the approval is pending gets the same link.
 * - Approved: the call goes through, once (the approval is used up).
 * - Denied: refused, as long as the denied request lives (its `ttl`); a denial is final.
 * - A rule with `approvers` (four-eyes): the same, but the decision is another person's — a
 *   signed-in user whose claims match, never the caller (connect/approval-routes.ts); the
 *   caller's link leads to a page that shows the request waiting and who may approve it.
 * - A caller (or a four-eyes rule) with as many open requests as it may have: refused.
 *
 * Nothing of the arguments is logged; the rule's name goes to the log, not to the client.
 */
import type { BackendCaller } from '../backends/backend.js';
import { ErrorCode, errorResponse, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { approvalInputRequired, approvalPurpose } from './approval-input.js';
import { approvalUrl, type Approval, type ApprovalStore, type HeldCall } from './approvals.js';
import type { RuleDecision } from './cel-rules.js';
import type { ListedTools } from './listed-tools.js';
import type { RequestFacts } from './policy-input.js';

export interface ConfirmParts {
  approvals: ApprovalStore;
  publicUrl: string;
  tools: ListedTools;
}

/** The answer to a held (or refused) call; none when an approval lets it through now, with the approval's id. */
export type HoldOutcome = { answer: JsonRpcMessage; approval?: undefined } | { answer?: undefined; approval: string };

export async function confirmHold(parts: ConfirmParts, caller: BackendCaller, id: JsonRpcId, facts: RequestFacts, decision: RuleDecision, policyVersion: string): Promise<HoldOutcome> {
  const log = { backend: facts.backend, tool: facts.tool, rule: decision.rule };
  const { ttlMs, approvers } = decision.confirm!;
  const listed = parts.tools.of(facts.backend, facts.tool ?? '');
  const call: HeldCall = { backend: facts.backend, tool: facts.tool ?? '', arguments: facts.arguments ?? {}, policyVersion, rule: decision.rule, ttlMs, toolTitle: listed.title, toolDescription: listed.description, ...(approvers ? { approvers } : {}), ...(caller.shownAs ? { shownAs: caller.shownAs } : {}) };
  const existing = await parts.approvals.forCall(caller.principal, call);
  if (existing?.status === 'approved' && (await parts.approvals.use(existing, call))) {
    caller.log.info({ ...log, approval: existing.id }, 'confirmed call goes through');
    return { approval: existing.id };
  }
  if (existing?.status === 'denied') {
    caller.log.info({ ...log, approval: existing.id }, 'call refused: its confirmation was denied');
    return { answer: errorResponse(id, ErrorCode.AccessDenied, approvers ? 'This call was denied by an approver; it will not run' : 'You denied this call; it will not run') };
  }
  const approval = existing?.status === 'pending' ? existing : await parts.approvals.hold(caller.principal, call);
  if (!approval) {
    caller.log.info(log, 'call refused: too many calls wait for approval');
    return { answer: errorResponse(id, ErrorCode.AccessDenied, 'Too many calls wait for approval; decide or let some expire, then retry') };
  }
  caller.log.info({ ...log, approval: approval.id }, 'call held for confirmation');
  return { answer: confirmationRequired(id, approval, approvalUrl(parts.publicUrl, approval.id), declaresUrlElicitation(caller.clientCapabilities), caller.sealState) };
}

/** -32042 with the page's URL (2025-11-25), `input_required` with it and a sealed state (2026-07-28), or the link as a tool result the user sees. */
function confirmationRequired(id: JsonRpcId, approval: Approval, url: string, urlMode: boolean, sealState: ((purpose: string) => string) | undefined): JsonRpcMessage {
  const what = approval.shownAs ? `"${approval.shownAs.tool}" on "${approval.shownAs.server}"` : `"${approval.tool}" on "${approval.backend}"`;
  const message = approval.approvers ? `${what} waits for the approval of another person before it runs.` : `${what} waits for your confirmation before it runs.`;
  if (urlMode && sealState) return approvalInputRequired(id, url, message, sealState(approvalPurpose(approval.id)));
  if (urlMode) return errorResponse(id, ErrorCode.UrlElicitationRequired, message, { elicitations: [{ mode: 'url', elicitationId: approval.id, url, message }] });
  const text = approval.approvers ? `${message} Open ${url} in your browser to follow it; retry once it is approved.` : `${message} Open ${url} in your browser, sign in, check the call and approve it, then retry.`;
  return { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }], isError: true } };
}

/** Whether `initialize` declared URL-mode elicitation (2025-11-25 `capabilities.elicitation.url`). */
function declaresUrlElicitation(capabilities: Record<string, unknown> | undefined): boolean {
  const elicitation = capabilities?.elicitation;
  return typeof elicitation === 'object' && elicitation !== null && 'url' in elicitation;
}
