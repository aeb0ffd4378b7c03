/**
 * The approval page of a call held by a `confirm` rule (issue 46 §3, §4; policy/confirm-hold.ts
 * holds the call and sends the client here by URL-mode elicitation or a link as text).
 *
 * - `GET /approve?id=…`: needs a browser session (else sign-in and back, as `/connect`). The
 *   approval is looked up under the signed-in user's own key (policy/approvals.ts), so a link
 *   opened by anyone but the caller finds nothing: a refusal that shows nothing of the call.
 *   For the caller, the call as it will run, with Approve and Deny.
 * - `POST /approve`: the same checks, then the form's CSRF token (browser-sessions.ts); the
 *   decision is taken once (a second, from another tab or replica, gets "already decided").
 *
 * Host and Origin are checked before either, as for every browser page (app.ts). The client
 * never sees this page's form: it only has the link, so neither it nor the model can approve.
 * Nothing of the arguments is logged.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { loginUrl, registerFormParser, type BrowserSessions, type BrowserUser } from '../browser/browser-sessions.js';
import { approvalPage, approvedPage, deniedPage } from '../browser/approval-pages.js';
import { errorPage, REDIRECT_HEADERS, refusalPage, sendPage, setPageErrorHandler } from '../browser/pages.js';
import type { Approval, ApprovalStore } from '../policy/approvals.js';

export interface ApprovalRouteDeps {
  sessions: BrowserSessions;
  approvals: ApprovalStore;
}

export function registerApprovalRoutes(app: FastifyInstance, deps: ApprovalRouteDeps): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get<{ Querystring: { id?: string } }>('/approve', async (request, reply) => {
      const checked = await callersPending(deps, request, reply, String(request.query.id ?? ''));
      if (!checked) return reply;
      const { user, approval } = checked;
      return sendPage(reply, approvalPage({ ...approval, accountLabel: user.label, csrfToken: user.csrfToken }));
    });

    scope.post<{ Body: Record<string, string> }>('/approve', async (request, reply) => {
      const form = request.body ?? {};
      const checked = await callersPending(deps, request, reply, String(form.id ?? ''));
      if (!checked) return reply;
      const { user, approval } = checked;
      if (!deps.sessions.csrfValid(user, form.csrf)) {
        return sendPage(reply, refusalPage({ title: 'Request refused', reason: 'This form has expired or did not come from this site. Open the link from your client again.' }));
      }
      if (form.action !== 'approve' && form.action !== 'deny') return sendPage(reply, errorPage({ status: 400, title: 'Unknown action', detail: 'Choose Approve or Deny.' }));
      const decided = await deps.approvals.decide(approval, form.action === 'approve' ? 'approved' : 'denied');
      if (!decided) return sendPage(reply, alreadyDecided());
      request.log.info({ approval: approval.id, backend: approval.backend, tool: approval.tool, rule: approval.rule, decision: decided.status }, 'held call decided');
      return sendPage(reply, decided.status === 'approved' ? approvedPage({ tool: approval.tool }) : deniedPage({ tool: approval.tool }));
    });
  });
}

/**
 * The signed-in caller and their pending approval, or undefined after answering: sign-in
 * first; a link that is not the user's, or has expired (one page for both: the other user's
 * approval is not even found); one already decided or used.
 */
async function callersPending(deps: ApprovalRouteDeps, request: FastifyRequest, reply: FastifyReply, id: string): Promise<{ user: BrowserUser; approval: Approval } | undefined> {
  const user = await deps.sessions.current(request);
  if (!user) {
    await reply.headers(REDIRECT_HEADERS).redirect(loginUrl(`/approve?id=${encodeURIComponent(id)}`), 303);
    return undefined;
  }
  const approval = await deps.approvals.get(user.userKey, id);
  if (!approval) {
    request.log.info('approval link not found for the signed-in user (another account, expired or unknown)');
    await sendPage(reply, refusalPage({ title: 'This link is not for your account', reason: `You are signed in as ${user.label}. This approval link was made for another account, or it has expired, so nothing of it is shown. If you did not expect this link, close this page.`, signOutCsrfToken: user.csrfToken }));
    return undefined;
  }
  if (approval.status !== 'pending') {
    await sendPage(reply, alreadyDecided());
    return undefined;
  }
  return { user, approval };
}

function alreadyDecided() {
  return errorPage({ status: 410, title: 'This call was already decided', detail: 'An approval is taken once and used once. Return to your client; if the call is asked again, it brings a new link.' });
}
