/**
 * Server-rendered pages of the browser flows (SPEC §4): consent for a URL-mode elicitation,
 * refusal (the link belongs to another account — phishing protection), the outcomes, errors,
 * the signed-in user's connections, and signed-out. Each function returns the status, the
 * document and its headers; {@link sendPage} writes one to a reply.
 *
 * Forms post back to this origin with the session's CSRF token in the field {@link CSRF_FIELD}.
 */
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { html, layout, securityHeaders, type SafeHtml } from './page-layout.js';

export interface Page {
  status: number;
  html: string;
  headers: Record<string, string>;
}

/** Name of the hidden form field that carries the browser session's CSRF token. */
export const CSRF_FIELD = 'csrf';

/** Redirects of the browser flows are not cached and carry no referrer to other sites. */
export const REDIRECT_HEADERS = { 'cache-control': 'no-store', 'referrer-policy': 'same-origin' } as const;

export function page(status: number, title: string, body: SafeHtml, formActions: readonly string[] = []): Page {
  return {
    status,
    html: layout({ title, body }),
    headers: { ...securityHeaders(formActions), 'content-type': 'text/html; charset=utf-8' },
  };
}

export const csrfInput = (token: string) => html`<input type="hidden" name="${CSRF_FIELD}" value="${token}">`;

export function consentPage(o: {
  serverName: string;
  provider: string;
  scopes: string[];
  /** The signed-in user, e.g. their name or `sub`. */
  accountLabel: string;
  elicitationId: string;
  csrfToken: string;
  /** The elicitation's message, shown as the server's reason. */
  message?: string;
  /**
   * Origins the Continue answer redirects to (the provider's authorization endpoint):
   * browsers apply the page's `form-action` to the redirects that follow a form submission.
   */
  formActions?: string[];
}): Page {
  const scopes = o.scopes.length
    ? html`<ul class="scopes">${o.scopes.map((s) => html`<li><code>${s}</code></li>`)}</ul>`
    : html`<p>No specific permissions are requested; ${o.provider} decides what access to grant.</p>`;
  return page(
    200,
    `Connect your ${o.provider} account`,
    html`<p><strong>${o.serverName}</strong> asks to use your <strong>${o.provider}</strong> account on your behalf.</p>
${o.message ? html`<p class="panel">${o.message}</p>` : ''}
<dl class="panel">
<dt>Signed in as</dt><dd>${o.accountLabel}</dd>
<dt>Server</dt><dd>${o.serverName}</dd>
<dt>Account to connect</dt><dd>${o.provider}</dd>
</dl>
<h2>Permissions requested</h2>
${scopes}
<p class="muted">Continue takes you to ${o.provider} to approve. Only continue if you just asked your MCP client for something that needs ${o.provider}; if you did not, or someone sent you this link, choose Cancel.</p>
<form method="post" action="/connect">
<input type="hidden" name="elicitationId" value="${o.elicitationId}">
${csrfInput(o.csrfToken)}
<div class="actions">
<button type="submit" class="primary" name="action" value="continue">Continue to ${o.provider}</button>
<button type="submit" class="secondary" name="action" value="cancel">Cancel</button>
</div>
</form>`,
    o.formActions,
  );
}

/**
 * 403: the request is understood and refused, e.g. "This link was created for a different
 * account". With `signOutCsrfToken` (a signed-in user's token) it offers a sign-out button,
 * so someone signed in with the wrong account can switch.
 */
export function refusalPage(o: { title: string; reason: string; signOutCsrfToken?: string }): Page {
  return page(
    403,
    o.title,
    html`<p>${o.reason}</p>
<p class="muted">Nothing was changed. If you expected this to work, return to your MCP client and start again from there.</p>
${
  o.signOutCsrfToken !== undefined
    ? html`<form method="post" action="/logout" class="actions">
${csrfInput(o.signOutCsrfToken)}<button type="submit" class="secondary">Sign out to use another account</button>
</form>`
    : ''
}`,
  );
}

export function connectedPage(o: { provider: string; serverName: string }): Page {
  return page(
    200,
    `${o.provider} connected`,
    html`<p>Connected — you can return to your client.</p>
<p class="muted">${o.serverName} can now use your ${o.provider} account. You can close this tab; retry the request in your MCP client if it does not continue by itself.</p>
<p><a href="/connections">Manage connected accounts</a></p>`,
  );
}

export function declinedPage(o: { provider: string }): Page {
  return page(
    200,
    'Connection cancelled',
    html`<p>Your ${o.provider} account was not connected.</p>
<p class="muted">You can close this tab and return to your client.</p>`,
  );
}

export function errorPage(o: { status: number; title: string; detail: string; retryUrl?: string }): Page {
  const retry = o.retryUrl !== undefined && isSafeLink(o.retryUrl) ? o.retryUrl : undefined;
  return page(
    o.status,
    o.title,
    html`<p>${o.detail}</p>
${retry ? html`<p class="actions"><a class="button primary" href="${retry}">Try again</a></p>` : html`<p class="muted">Return to your MCP client and start again from there.</p>`}`,
  );
}

export interface ConnectionEntry {
  provider: string;
  status: 'connected' | 'expired' | 'not connected';
  /** Epoch ms when the access token expires. */
  expiresAt?: number;
  /**
   * A refresh token is kept: the gateway renews the access itself (connect/usable-token.ts), so
   * the page says so instead of the access token's expiry, which would read as the link's end
   * (issue 46 §7).
   */
  refreshes?: boolean;
}

/**
 * The signed-in user's accounts: Connect where nothing usable is linked (not connected, or
 * expired), Disconnect where something is stored. `formActions`: the authorization
 * endpoints Connect redirects to (see {@link consentPage}).
 */
export function connectionsPage(o: { accountLabel: string; connections: ConnectionEntry[]; csrfToken: string; formActions?: string[] }): Page {
  const rows = o.connections.map((c) => {
    const statusText = c.status === 'connected' ? 'Connected' : c.status === 'expired' ? 'Expired' : 'Not connected';
    const expiry =
      c.status === 'connected' && c.refreshes
        ? html` <span class="muted">· refreshes by itself</span>`
        : c.expiresAt !== undefined && Number.isFinite(c.expiresAt)
          ? html` <span class="muted">· ${c.status === 'expired' ? 'expired' : 'valid until'} <time datetime="${new Date(c.expiresAt).toISOString()}">${formatTime(c.expiresAt)}</time>${c.status === 'expired' ? '' : ', then connect again'}</span>`
          : '';
    const form = (action: 'connect' | 'disconnect', label: string, style: string) =>
      html`<form method="post" action="/connections/${encodeURIComponent(c.provider)}/${action}">
${csrfInput(o.csrfToken)}<button type="submit" class="${style}" aria-label="${label} ${c.provider}">${label}</button>
</form>`;
    const connect = c.status === 'connected' ? '' : form('connect', 'Connect', 'primary');
    const disconnect = c.status === 'not connected' ? '' : form('disconnect', 'Disconnect', 'danger');
    return html`<li><div><strong>${c.provider}</strong><br><span class="status status-${c.status.replace(' ', '-')}">${statusText}</span>${expiry}</div>${connect}${disconnect}</li>`;
  });
  return page(
    200,
    'Connected accounts',
    html`<p>Signed in as <strong>${o.accountLabel}</strong>.</p>
${rows.length ? html`<ul class="list">${rows}</ul>` : html`<p class="muted">No accounts are configured for connection.</p>`}
<p class="muted">Connect links an account now; your MCP client also asks you when a server first needs one.</p>
<form method="post" action="/logout" class="actions">
${csrfInput(o.csrfToken)}<button type="submit" class="secondary">Sign out</button>
</form>`,
    o.formActions,
  );
}

/** After sign-out; "Sign in again" asks the authorization server to re-authenticate (another account can be chosen). */
export function signedOutPage(): Page {
  return page(200, 'Signed out', html`<p>You are signed out of Switchboard.</p>
<p class="actions"><a class="button primary" href="/login?prompt=login">Sign in again</a></p>`);
}

export function sendPage(reply: FastifyReply, page: Page): FastifyReply {
  return reply.code(page.status).headers(page.headers).send(page.html);
}

/**
 * Makes errors inside a scope of page routes (bad form body, too large, parser errors,
 * unexpected failures) answer with an error page instead of the gateway's JSON-RPC errors —
 * and never with a stack.
 */
export function setPageErrorHandler(scope: FastifyInstance): void {
  scope.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 600 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'browser page failed');
    const detail =
      status === 413
        ? 'The form was too large.'
        : status === 415
          ? 'The form was sent in a format this page does not accept.'
          : status >= 500
            ? 'Something went wrong on our side. Please try again in a moment.'
            : 'The request could not be understood.';
    return sendPage(reply, errorPage({ status, title: status >= 500 ? 'Something went wrong' : 'Bad request', detail }));
  });
}

/** Same-origin absolute paths and http(s) URLs only (never `javascript:`, `data:`, `//host`). */
function isSafeLink(url: string): boolean {
  if (url.startsWith('/')) return !url.startsWith('//') && !url.includes('\\');
  return /^https?:\/\//i.test(url) && URL.canParse(url);
}

function formatTime(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace(/:\d\d\.\d{3}Z$/, ' UTC');
}
