/**
 * The approval pages of calls held by `confirm` rules (issue 46 §3, §4; policy/confirm-hold.ts
 * holds the call and sends the client here by URL-mode elicitation or a link as text).
 *
 * - `GET /approve?id=…`: needs a browser session (else sign-in and back, as `/connect`). Who
 *   the signed-in user is to the request decides what they see:
 *   - its caller, for a rule without `approvers`: the call as it will run, Approve and Deny;
 *   - its caller, for a four-eyes rule: a waiting page (pending, who may approve, or the
 *     outcome), with no buttons;
 *   - an approver — claims matching the rule's `approvers`, and not the caller: the call, with
 *     Approve and Deny (found in the rule's queue, policy/approval-index.ts);
 *   - anyone else: a refusal saying they may not decide it, which shows nothing of the call
 *     (the request is not even found: it lives under its caller's key).
 * - `POST /approve`: the same checks, then the form's CSRF token (browser-sessions.ts); a
 *   caller posting a decision on their own four-eyes request is refused. A decision is taken
 *   once (a second, from another tab or replica, gets "already decided").
 * - `GET /approvals` (approvals-list-route.ts): what the signed-in user may decide.
 *
 * Host and Origin are checked before either, as for every browser page (app.ts). The client
 * never sees this page's form: it only has the link, so neither it nor the model can approve.
 * Nothing of the arguments is logged.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { loginUrl, registerFormParser, type BrowserSessions, type BrowserUser } from '../browser/browser-sessions.js';
import { approvalPage, approvedPage, deniedPage, waitingPage, type ClientShown } from '../browser/approval-pages.js';
import { errorPage, REDIRECT_HEADERS, refusalPage, sendPage, setPageErrorHandler } from '../browser/pages.js';
import type { Approval, ApprovalStore } from '../policy/approvals.js';
import { approverRules, mayApprove } from '../policy/approvers.js';
import { registerApprovalsList } from './approvals-list-route.js';

/** A client's registered name by its client id (the broker's registrations), undefined when unknown. */
export type ClientNameOf = (clientId: string) => Promise<string | undefined>;

export interface ApprovalRouteDeps {
  sessions: BrowserSessions;
  approvals: ApprovalStore;
  /** The live config: which rules' `approvers` the viewer's claims match. */
  config: Config;
  /** In broker mode: a client's registered name by its id (broker/store-adapter.ts). */
  clientName?: ClientNameOf;
}

/** What the signed-in user is to a request they may see. */
interface Seen {
  user: BrowserUser;
  approval: Approval;
  role: 'caller' | 'approver';
}

export function registerApprovalRoutes(app: FastifyInstance, deps: ApprovalRouteDeps): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get<{ Querystring: { id?: string } }>('/approve', async (request, reply) => {
      const seen = await seenBy(deps, request, reply, String(request.query.id ?? ''));
      if (!seen) return reply;
      const { user, approval, role } = seen;
      const client = await clientShown(deps, approval.clientId);
      if (role === 'caller' && approval.approvers) return sendPage(reply, waitingPage(approval, user.label, client));
      if (approval.status !== 'pending') return sendPage(reply, alreadyDecided());
      const askedBy = role === 'caller' ? user.label : approval.callerLabel;
      return sendPage(reply, approvalPage({ ...approval, askedBy, client, decider: role === 'approver' ? user.label : undefined, csrfToken: user.csrfToken }));
    });

    scope.post<{ Body: Record<string, string> }>('/approve', async (request, reply) => {
      const form = request.body ?? {};
      const seen = await seenBy(deps, request, reply, String(form.id ?? ''));
      if (!seen) return reply;
      const { user, approval, role } = seen;
      if (!deps.sessions.csrfValid(user, form.csrf)) {
        return sendPage(reply, refusalPage({ title: 'Request refused', reason: 'This form has expired or did not come from this site. Open the link from your client again.' }));
      }
      if (role === 'caller' && approval.approvers) {
        request.log.info({ approval: approval.id, rule: approval.rule }, 'caller refused: a four-eyes request is decided by another person');
        return sendPage(reply, refusalPage({ title: 'Another person must decide this call', reason: 'You asked for this call, so you may not approve or deny it yourself. An approver decides it; retry your call once it is approved.' }));
      }
      if (form.action !== 'approve' && form.action !== 'deny') return sendPage(reply, errorPage({ status: 400, title: 'Unknown action', detail: 'Choose Approve or Deny.' }));
      const decided = await deps.approvals.decide(approval, form.action === 'approve' ? 'approved' : 'denied', user);
      if (!decided) return sendPage(reply, alreadyDecided());
      request.log.info({ approval: approval.id, backend: approval.backend, tool: approval.tool, rule: approval.rule, decision: decided.status, by: role }, 'held call decided');
      return sendPage(reply, decided.status === 'approved' ? approvedPage({ tool: approval.tool, byApprover: role === 'approver' }) : deniedPage({ tool: approval.tool }));
    });

    registerApprovalsList(scope, deps);
  });
}

/**
 * The signed-in user and the request as they may see it, or undefined after answering:
 * sign-in first; then the user's own request (under their key), else a four-eyes request they
 * may decide; else one page for a link that is another's, has expired or is unknown, which
 * shows nothing of the call.
 */
async function seenBy(deps: ApprovalRouteDeps, request: FastifyRequest, reply: FastifyReply, id: string): Promise<Seen | undefined> {
  const user = await deps.sessions.current(request);
  if (!user) {
    await reply.headers(REDIRECT_HEADERS).redirect(loginUrl(`/approve?id=${encodeURIComponent(id)}`), 303);
    return undefined;
  }
  const own = await deps.approvals.get(user.userKey, id);
  if (own) return { user, approval: own, role: 'caller' };
  const other = await deps.approvals.forApprover(user.userKey, id, approverRules(deps.config.policy.rules, user.claims));
  if (other?.approvers && mayApprove(other.approvers, other, user)) return { user, approval: other, role: 'approver' };
  request.log.info('approval link not found for the signed-in user (another account, not an approver, expired or unknown)');
  await sendPage(reply, refusalPage({ title: 'This link is not for your account', reason: `You are signed in as ${user.label}, and you may not decide this request: it was made for another account, or it has expired, so nothing of it is shown. If you did not expect this link, close this page.`, signOutCsrfToken: user.csrfToken }));
  return undefined;
}

/**
 * The caller's client as the page names it (issue 46 §3): the name it registered with the
 * broker, beside its id; the id alone without one (another issuer's client, a URL client_id,
 * a store that does not answer); nothing when the token named no client.
 */
async function clientShown(deps: ApprovalRouteDeps, clientId: string | undefined): Promise<ClientShown | undefined> {
  if (!clientId) return undefined;
  const name = await deps.clientName?.(clientId).catch(() => undefined);
  return name ? { id: clientId, name } : { id: clientId };
}

function alreadyDecided() {
  return errorPage({ status: 410, title: 'This call was already decided', detail: 'An approval is taken once and used once. Return to your client; if the call is asked again, it brings a new link.' });
}
