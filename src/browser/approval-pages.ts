/**
 * The pages of a call held for confirmation (issue 46 §3): what the caller reads before
 * deciding — who asks, the backend, the tool's title and description, the exact arguments
 * (pretty-printed; every value escaped by {@link html}), the rule and when the request
 * expires — with Approve and Deny posting back with the CSRF token; and the outcomes.
 *
 * The routes (connect/approval-routes.ts) show {@link approvalPage} only to whoever may decide:
 * the caller, or for a four-eyes rule a matching approver; the caller of a four-eyes request
 * gets {@link waitingPage} (no buttons); anyone else gets pages.ts's refusal, which shows
 * nothing of the call. `/approvals` is {@link approvalsListPage}.
 */
import type { OpenEntry } from '../policy/approval-index.js';
import type { Approval } from '../policy/approvals.js';
import { describeApprovers } from '../policy/approvers.js';
import { html, type SafeHtml } from './page-layout.js';
import { csrfInput, page, type Page } from './pages.js';

/** The caller's OAuth client as the page names it: its registered name (broker mode) and its id. */
export interface ClientShown {
  id: string;
  name?: string;
}

/** The held call as the page shows it, and the signed-in caller's name and form token. */
export interface ApprovalView extends Pick<Approval, 'id' | 'backend' | 'tool' | 'toolTitle' | 'toolDescription' | 'arguments' | 'rule' | 'expiresAt' | 'shownAs'> {
  /** The client that asks, when the access token names one. */
  client?: ClientShown;
  /** Who asks: the signed-in caller as the ID token names them, or for an approver the caller as the access token did (name, username or email; `sub` only without). */
  askedBy: string;
  /** The signed-in approver deciding someone else's call (four-eyes); absent for the caller. */
  decider?: string;
  csrfToken: string;
}

const when = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');

/**
 * The server and tool rows. Through a virtual server (issue 46 §6) first the names the client
 * saw, then the real backend and tool the call goes to, which the approval is bound to.
 */
function serverAndTool(o: Pick<Approval, 'backend' | 'tool' | 'toolTitle' | 'shownAs'>): SafeHtml {
  const tool = o.toolTitle ? html`${o.toolTitle} (<code>${o.tool}</code>)` : html`<code>${o.tool}</code>`;
  if (!o.shownAs) return html`<dt>Server</dt><dd>${o.backend}</dd>
<dt>Tool</dt><dd>${tool}</dd>`;
  return html`<dt>Server</dt><dd>${o.shownAs.server} <span class="muted">(a virtual server)</span></dd>
<dt>Tool</dt><dd><code>${o.shownAs.tool}</code></dd>
<dt>Runs on</dt><dd>${o.backend}: ${tool}</dd>`;
}

/** The client row: its registered name and id, or the id alone. */
function clientRow(client: ClientShown | undefined): SafeHtml | '' {
  if (!client) return '';
  return client.name ? html`<dt>Client</dt><dd>${client.name} <span class="muted">(client id <code>${client.id}</code>)</span></dd>` : html`<dt>Client</dt><dd><code>${client.id}</code></dd>`;
}

export function approvalPage(o: ApprovalView): Page {
  const expires = when(o.expiresAt);
  const intro =
    o.decider === undefined
      ? html`<p>Your MCP client asks to run a call that a policy of this gateway wants you to confirm first. Approve it only if you asked for exactly this.</p>`
      : html`<p>Someone asks to run a call that a policy of this gateway wants another person to approve first. You decide it as <strong>${o.decider}</strong>: approve it only if this call should run, exactly as shown.</p>`;
  return page(
    200,
    o.decider === undefined ? 'Confirm a call' : 'Approve a call',
    html`${intro}
<dl class="panel">
<dt>Asked by</dt><dd>${o.askedBy}</dd>
${clientRow(o.client)}
${serverAndTool(o)}
${o.toolDescription ? html`<dt>What the tool says it does</dt><dd>${o.toolDescription}</dd>` : ''}
<dt>Rule</dt><dd><code>${o.rule}</code></dd>
<dt>Expires</dt><dd>${expires}</dd>
</dl>
<h2>Arguments</h2>
<pre class="panel"><code>${JSON.stringify(o.arguments, null, 2)}</code></pre>
<p class="muted">Approve lets this call, with these arguments, run once when the client retries it. Deny refuses it for good.</p>
<form method="post" action="/approve">
<input type="hidden" name="id" value="${o.id}">
${csrfInput(o.csrfToken)}
<div class="actions">
<button type="submit" class="primary" name="action" value="approve">Approve</button>
<button type="submit" class="danger" name="action" value="deny">Deny</button>
</div>
</form>`,
  );
}

export function approvedPage(o: { tool: string; byApprover?: boolean }): Page {
  return page(
    200,
    'Call approved',
    html`<p>Approved: <code>${o.tool}</code> runs once, with the arguments you saw, when ${o.byApprover ? 'the caller’s client' : 'your client'} retries it.</p>
<p class="muted">You can close this tab and return to your client.</p>`,
  );
}

export function deniedPage(o: { tool: string }): Page {
  return page(
    200,
    'Call denied',
    html`<p>Denied: <code>${o.tool}</code> will not run with these arguments.</p>
<p class="muted">You can close this tab and return to your client.</p>`,
  );
}

/** The caller's page of a four-eyes request: where it stands and who may approve it; no buttons, nothing to decide. */
export function waitingPage(o: Pick<Approval, 'backend' | 'tool' | 'toolTitle' | 'shownAs' | 'rule' | 'expiresAt' | 'status' | 'decidedBy' | 'approvers'>, accountLabel: string, client?: ClientShown): Page {
  const by = o.decidedBy?.label ?? 'an approver';
  const state =
    o.status === 'pending'
      ? html`<p>This call waits for the approval of another person. You asked for it, so you cannot approve it yourself. Keep this page or your client open; retry the call once it is approved.</p>`
      : o.status === 'approved'
        ? html`<p>Approved by <strong>${by}</strong>. Retry the call in your client: it runs once.</p>`
        : o.status === 'denied'
          ? html`<p>Denied by <strong>${by}</strong>. This call will not run.</p>`
          : html`<p>This approval was used: the call ran once. If it is asked again, it brings a new link.</p>`;
  return page(
    200,
    o.status === 'pending' ? 'Waiting for approval' : 'Approval decided',
    html`${state}
<dl class="panel">
<dt>Asked by</dt><dd>${accountLabel} (you)</dd>
${clientRow(client)}
${serverAndTool(o)}
<dt>Rule</dt><dd><code>${o.rule}</code></dd>
<dt>Who may approve</dt><dd>Signed-in users with ${describeApprovers(o.approvers ?? {})}, other than you</dd>
<dt>Expires</dt><dd>${when(o.expiresAt)}</dd>
</dl>`,
  );
}

/** A request as `/approvals` lists it. */
export interface ListedApproval extends OpenEntry {
  /** The viewer's own request (a rule without approvers), rather than someone else's they may approve. */
  mine: boolean;
}

export function approvalsListPage(o: { accountLabel: string; approvals: ListedApproval[] }): Page {
  const rows = o.approvals.map(
    (a) => html`<tr><td><a href="/approve?id=${encodeURIComponent(a.id)}">${a.mine ? 'Your call' : a.callerLabel}</a></td><td>${a.backend}</td><td><code>${a.tool}</code></td><td><code>${a.rule}</code></td><td>${when(a.expiresAt)}</td></tr>`,
  );
  return page(
    200,
    'Calls waiting for you',
    html`<p>Signed in as <strong>${o.accountLabel}</strong>. These calls wait for a decision you may take; open one to see its arguments and approve or deny it.</p>
${
  rows.length
    ? html`<table class="panel"><thead><tr><th>Asked by</th><th>Server</th><th>Tool</th><th>Rule</th><th>Expires</th></tr></thead><tbody>${rows}</tbody></table>`
    : html`<p class="muted">Nothing waits for your decision.</p>`
}`,
  );
}
