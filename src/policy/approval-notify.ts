/**
 * The `approvals.notify` webhook (issue 46 §3): each new request of a `confirm` rule is POSTed
 * as JSON — `{ id, link, rule, backend, tool, caller, expiresAt }`, never the arguments — so a
 * team can be pinged in chat, and the approver follows the link (they sign in there; the link
 * alone shows nothing to anyone who may not decide it).
 *
 * It goes through the outbound SSRF guard of every URL the gateway fetches on someone's
 * behalf (providers/safe-fetch.ts): public addresses only (loopback too while `publicUrl` is
 * loopback http, as for discovered endpoints: tests and local development), pinned against
 * DNS rebinding, no redirects, the whole exchange within `approvals.notify.timeout`. It is
 * sent beside the hold, never awaited: a slow or failing webhook never holds up the call.
 * Each outcome is counted (`switchboard_approval_notifications_total{outcome}`); a failure is
 * logged with its reason and status only — not the URL, whose path often is the secret.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import { SafeFetchError, safeFetch } from '../providers/safe-fetch.js';
import { approvalUrl, type Approval } from './approvals.js';

/** Largest webhook answer read (and dropped). */
const MAX_ANSWER_BYTES = 16 * 1024;

export function approvalNotifier(config: Config, deps: { metrics: Metrics; log: FastifyBaseLogger }): (approval: Approval) => void {
  return (approval) => {
    // Read per request: a reload may set, change or remove the webhook.
    const notify = config.approvals.notify;
    if (!notify) return;
    const body = JSON.stringify({
      id: approval.id,
      link: approvalUrl(config.publicUrl, approval.id),
      rule: approval.rule,
      backend: approval.backend,
      tool: approval.tool,
      caller: approval.callerLabel,
      expiresAt: new Date(approval.expiresAt).toISOString(),
    });
    const allowLoopback = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/.test(config.publicUrl);
    const sent = safeFetch(notify.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, allowLoopback, timeoutMs: notify.timeout, maxBodyBytes: MAX_ANSWER_BYTES });
    void sent.then(
      (res) => {
        const outcome = res.ok ? 'sent' : 'status';
        deps.metrics.approvalNotifications.inc({ outcome });
        if (!res.ok) deps.log.warn({ approval: approval.id, status: res.status }, 'approvals.notify: the webhook refused the request');
      },
      (err: unknown) => {
        const reason = err instanceof SafeFetchError ? err.reason : 'network';
        deps.metrics.approvalNotifications.inc({ outcome: reason });
        deps.log.warn({ approval: approval.id, reason }, 'approvals.notify: the webhook could not be reached');
      },
    );
  };
}
