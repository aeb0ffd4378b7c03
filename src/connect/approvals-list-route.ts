/**
 * `GET /approvals` (issue 46 §3): the pending requests the signed-in user may decide — their own
 * requests under rules without `approvers`, and the four-eyes requests of others under rules
 * whose `approvers` their claims match — each linking to its approval page. Read from the
 * shared store's indexes (policy/approval-index.ts), so every replica lists the same: the
 * user's open list and the queues of the matching rules, each bounded; nothing is scanned.
 * The list shows no arguments: the approval page does, to whoever may decide.
 */
import type { FastifyInstance } from 'fastify';
import { approvalsListPage, type ListedApproval } from '../browser/approval-pages.js';
import { loginUrl, type BrowserUser } from '../browser/browser-sessions.js';
import { REDIRECT_HEADERS, sendPage } from '../browser/pages.js';
import { approverRules } from '../policy/approvers.js';
import type { ApprovalRouteDeps } from './approval-routes.js';

export function registerApprovalsList(scope: FastifyInstance, deps: ApprovalRouteDeps): void {
  scope.get('/approvals', async (request, reply) => {
    const user = await deps.sessions.current(request);
    if (!user) return reply.headers(REDIRECT_HEADERS).redirect(loginUrl('/approvals'), 303);
    return sendPage(reply, approvalsListPage({ accountLabel: user.label, approvals: await decidable(deps, user) }));
  });
}

/** The pending requests `user` may decide, soonest to expire first. */
async function decidable(deps: ApprovalRouteDeps, user: BrowserUser): Promise<ListedApproval[]> {
  const { approvals } = deps;
  const listed: ListedApproval[] = [];
  for (const entry of await approvals.index.open(user.userKey)) {
    if (entry.fourEyes) continue;
    const approval = await approvals.get(user.userKey, entry.id);
    if (approval?.status === 'pending') listed.push({ ...entry, callerLabel: user.label, mine: true });
  }
  for (const rule of approverRules(deps.config.policy.rules, user.claims)) {
    for (const entry of await approvals.index.queued(rule)) {
      if (entry.userKey !== user.userKey) listed.push({ ...entry, mine: false });
    }
  }
  return listed.sort((a, b) => a.expiresAt - b.expiresAt);
}
