/**
 * What is told of each step of a held call's approval (issue 46 §3, §5): the audit records
 * (ops/audit.ts `approval`: requested, approved, denied, expired, used — with the rule,
 * backend, tool, argument hash and who decided, never the arguments) and, for a new request,
 * the `approvals.notify` webhook (approval-notify.ts). Both run beside the request: an audit
 * record is a line written, and the webhook is sent without being waited for, so neither ever
 * holds up the call or the page.
 */
import type { Audit } from '../ops/audit.js';
import type { OpenEntry } from './approval-index.js';
import { openEntry, type Approval, type ApprovalEvents } from './approvals.js';

export interface ApprovalEventParts {
  /** The audit as the live config has it now (undefined while `audit.sink` is none). */
  audit: () => Audit | undefined;
  /** Sends a new request to `approvals.notify`, when configured (approval-notify.ts). */
  notify?: (approval: Approval) => void;
}

export function approvalEvents(parts: ApprovalEventParts): ApprovalEvents {
  const record = (step: 'requested' | 'approved' | 'denied' | 'expired' | 'used', a: OpenEntry, approverKey?: string) =>
    parts.audit()?.approval({ step, userKey: a.userKey, approverKey, approval: a.id, rule: a.rule, backend: a.backend, tool: a.tool, argumentsHash: a.argumentsHash, fourEyes: a.fourEyes, expiresAt: a.expiresAt });
  return {
    requested(approval) {
      record('requested', openEntry(approval));
      parts.notify?.(approval);
    },
    decided(approval) {
      record(approval.status === 'approved' ? 'approved' : 'denied', openEntry(approval), approval.decidedBy?.userKey);
    },
    used(approval) {
      record('used', openEntry(approval), approval.decidedBy?.userKey);
    },
    expired(entry) {
      record('expired', entry);
    },
  };
}
