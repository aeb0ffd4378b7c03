/**
 * The broker's consent page (SPEC §8; MCP 2025-11-25 "Security Best Practices" §"Confused
 * Deputy Problem": a proxy with one upstream client must ask the user for every MCP client).
 * It says who asks (the client's own name, marked as unverified, and what identifies it: the
 * URL of its metadata document or that it registered itself), where the answer goes (the
 * redirect URI's origin, the one fact an impostor cannot fake), who is signed in, and what
 * the client gets (which MCP endpoints, which scopes, for how long). Same frame, styles and
 * headers as the connect pages (src/browser/page-layout.ts).
 */
import { CSRF_FIELD, type Page } from '../browser/pages.js';
import { html, layout, securityHeaders } from '../browser/page-layout.js';

export interface ConsentView {
  /** `client_name` from the client's metadata (self-asserted), if any. */
  clientName?: string;
  clientId: string;
  /** The client_id is the URL of a Client ID Metadata Document (else: dynamically registered). */
  metadataDocument: boolean;
  /** Where the browser goes with the answer. */
  redirectUri: string;
  accountLabel: string;
  /** The MCP endpoints the token opens, each as a label and its resource identifier. */
  resources: Array<{ label: string; identifier: string }>;
  scopes: string[];
  /** How long the client may stay connected without asking again, e.g. "30 days". */
  lifetime: string;
  action: string;
  csrfToken: string;
}

export function consentPage(v: ConsentView): Page {
  const who = v.clientName?.trim() || 'An MCP client';
  const origin = URL.canParse(v.redirectUri) ? new URL(v.redirectUri).origin : v.redirectUri;
  const identity = v.metadataDocument
    ? html`<dd>described by <code>${v.clientId}</code></dd>`
    : html`<dd>registered itself with this gateway (id <code>${v.clientId}</code>); its name is not verified</dd>`;
  const scopes = v.scopes.length
    ? html`<ul class="scopes">${v.scopes.map((s) => html`<li><code>${s}</code></li>`)}</ul>`
    : html`<p>No specific scopes: only what every signed-in user may do.</p>`;
  const title = `Allow ${who} to use Switchboard?`;
  return {
    status: 200,
    html: layout({
      title,
      body: html`<p><strong>${who}</strong> asks to use MCP servers on this Switchboard as you.</p>
<dl class="panel">
<dt>Signed in as</dt><dd>${v.accountLabel}</dd>
<dt>Client</dt>${identity}
<dt>Your answer goes to</dt><dd><code>${origin}</code></dd>
</dl>
<h2>What it gets</h2>
<ul>${v.resources.map((r) => html`<li>${r.label} <span class="muted">(<code>${r.identifier}</code>)</span></li>`)}</ul>
${scopes}
<p class="muted">It stays connected for up to ${v.lifetime} unless you sign out of it in the client. Only allow this if you just started connecting an MCP client at <code>${origin}</code>; if you did not, or someone sent you this link, choose Deny.</p>
<form method="post" action="${v.action}">
<input type="hidden" name="${CSRF_FIELD}" value="${v.csrfToken}">
<div class="actions">
<button type="submit" class="primary" name="action" value="allow">Allow</button>
<button type="submit" class="secondary" name="action" value="deny">Deny</button>
</div>
</form>`,
    }),
    // Both answers end in a redirect to the client: browsers apply form-action to it.
    headers: { ...securityHeaders([v.redirectUri]), 'content-type': 'text/html; charset=utf-8' },
  };
}
