/**
 * What the approval page names (issue 46 §3, §6), as src/browser/approval-pages.ts renders it:
 * the caller's client by its registered name beside its id (both self-asserted or foreign, so
 * escaped), or by its id alone; through a virtual server, the server and tool the client saw
 * and the real backend and tool. The end-to-end tests open the page in Chromium
 * (confirm-paths.e2e); this one checks the rows against hostile names.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { approvalPage, waitingPage } from '../../src/browser/approval-pages.js';

const CALL = { id: 'a'.repeat(32), backend: 'bank', tool: 'transfer', toolDescription: 'Moves money', arguments: { amount: 5000 }, rule: 'big-transfers', expiresAt: Date.UTC(2026, 10, 29, 12), askedBy: 'Alice', csrfToken: 'csrf' };

describe('the approval page', () => {
  test('the client by its registered name and id, escaped', () => {
    const { html } = approvalPage({ ...CALL, client: { id: 'c-1"><script>', name: 'Claude <img src=x onerror=alert(1)>' } });
    assert.match(html, /<dt>Client<\/dt><dd>Claude &lt;img src=x onerror=alert\(1\)&gt; <span class="muted">\(client id <code>c-1&quot;&gt;&lt;script&gt;<\/code>\)<\/span><\/dd>/);
    assert.ok(!html.includes('<img') && !html.includes('<script>'));
  });

  test('the client id alone without a registered name; no row when the token names no client', () => {
    assert.match(approvalPage({ ...CALL, client: { id: 'desk-app' } }).html, /<dt>Client<\/dt><dd><code>desk-app<\/code><\/dd>/);
    assert.ok(!approvalPage(CALL).html.includes('<dt>Client</dt>'));
  });

  test('a virtual server\'s names first, then the real backend and tool', () => {
    const { html } = approvalPage({ ...CALL, shownAs: { server: 'desk<b>', tool: 'pay' } });
    assert.match(html, /<dt>Server<\/dt><dd>desk&lt;b&gt; <span class="muted">\(a virtual server\)<\/span><\/dd>\s*<dt>Tool<\/dt><dd><code>pay<\/code><\/dd>\s*<dt>Runs on<\/dt><dd>bank: <code>transfer<\/code><\/dd>/);
    const waiting = waitingPage({ ...CALL, shownAs: { server: 'desk', tool: 'pay' }, status: 'pending', approvers: { groups: ['finance'] } }, 'Alice', { id: 'desk-app', name: 'Desk' });
    assert.match(waiting.html, /<dt>Runs on<\/dt><dd>bank: <code>transfer<\/code><\/dd>/);
    assert.match(waiting.html, /<dt>Client<\/dt><dd>Desk /);
  });
});
