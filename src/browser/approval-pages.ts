/**
 * The pages of a call held for confirmation (issue 46 §3): what the caller reads before
 * deciding — who asks, the backend, the tool's title and description, the exact arguments
 * (pretty-printed; every value escaped by {@link html}), the rule and when the request
 * expires — with Approve and Deny posting back with the CSRF token; and the outcomes.
 *
 * The routes (connect/approval-routes.ts) show {@link approvalPage} only to the caller; anyone
 * else gets pages.ts's refusal, which shows nothing of the call.
 */
import type { Approval } from '../policy/approvals.js';
import { html } from './page-layout.js';
import { csrfInput, page, type Page } from './pages.js';

/** The held call as the page shows it, and the signed-in caller's name and form token. */
export interface ApprovalView extends Pick<Approval, 'id' | 'backend' | 'tool' | 'toolTitle' | 'toolDescription' | 'arguments' | 'rule' | 'expiresAt'> {
  /** The signed-in caller as the ID token names them (name, username or email; `sub` only without). */
  accountLabel: string;
  csrfToken: string;
}

export function approvalPage(o: ApprovalView): Page {
  const expires = new Date(o.expiresAt).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return page(
    200,
    'Confirm a call',
    html`<p>Your MCP client asks to run a call that a policy of this gateway wants you to confirm first. Approve it only if you asked for exactly this.</p>
<dl class="panel">
<dt>Asked by</dt><dd>${o.accountLabel}</dd>
<dt>Server</dt><dd>${o.backend}</dd>
<dt>Tool</dt><dd>${o.toolTitle ? html`${o.toolTitle} (<code>${o.tool}</code>)` : html`<code>${o.tool}</code>`}</dd>
${o.toolDescription ? html`<dt>What the tool says it does</dt><dd>${o.toolDescription}</dd>` : ''}
<dt>Rule</dt><dd><code>${o.rule}</code></dd>
<dt>Expires</dt><dd>${expires}</dd>
</dl>
<h2>Arguments</h2>
<pre class="panel"><code>${JSON.stringify(o.arguments, null, 2)}</code></pre>
<p class="muted">Approve lets this call, with these arguments, run once when your client retries it. Deny refuses it for good.</p>
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

export function approvedPage(o: { tool: string }): Page {
  return page(
    200,
    'Call approved',
    html`<p>Approved: <code>${o.tool}</code> runs once, with the arguments you saw, when your client retries it.</p>
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
