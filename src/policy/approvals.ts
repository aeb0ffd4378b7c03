/**
 * Calls held by a `confirm` rule and their approvals (issue 46 §1, §4), in the shared store so
 * that any replica can serve the approval page and let the client's retry through.
 *
 * Every key starts with the caller's `userKey` (the digest of iss+sub, SPEC §5), so a link
 * opened by anyone else finds nothing: the page cannot show them the call (issue 46 §3).
 *
 * An approval is bound to one call — the caller, the backend, the tool, the RFC 8785 hash of
 * the arguments and the policy version (cel-rules.ts) — by the key it is found under
 * ({@link bindingOf}); it lives for the rule's `ttl` from the moment the call was held. It is
 * decided once ({@link ApprovalStore.decide}: the first decision written wins, a denial is
 * final) and used once ({@link ApprovalStore.use}: the binding is taken atomically, so of two
 * retries racing on two replicas one goes through and the other is held again).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { canonicalJson } from '../ops/canonical-json.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'used';

export interface Approval {
  id: string;
  userKey: string;
  iss: string;
  sub: string;
  backend: string;
  tool: string;
  /** The tool's title and description as the backend last listed them to this replica, if it did. */
  toolTitle?: string;
  toolDescription?: string;
  /** The call's arguments, shown on the page exactly; never logged. */
  arguments: unknown;
  /** SHA-256 (hex) of the arguments' RFC 8785 canonical JSON, as the audit writes it. */
  argumentsHash: string;
  policyVersion: string;
  rule: string;
  status: ApprovalStatus;
  createdAt: number;
  expiresAt: number;
}

/** What a held call is: the parts of the binding, and what the page shows. */
export interface HeldCall {
  backend: string;
  tool: string;
  arguments: unknown;
  policyVersion: string;
  rule: string;
  ttlMs: number;
  toolTitle?: string;
  toolDescription?: string;
}

const ID = /^[A-Za-z0-9_-]{32}$/;

export class ApprovalStore {
  constructor(private readonly store: StateStore) {}

  /** The approval bound to this call, whatever its status; undefined when none lives. */
  async forCall(principal: Principal, call: HeldCall): Promise<Approval | undefined> {
    const id = await this.store.getValue(ValueKeys.approvalCall(principal.userKey, bindingOf(call)));
    return id ? this.get(principal.userKey, id) : undefined;
  }

  /** A new pending approval for the call; an approval another replica bound to it first is returned instead. */
  async hold(principal: Principal, call: HeldCall): Promise<Approval> {
    const now = Date.now();
    const { ttlMs, ...bound } = call;
    const { userKey, iss, sub } = principal;
    // Undefined texts (a tool never listed here) vanish in the JSON.
    const approval: Approval = { id: randomBytes(24).toString('base64url'), userKey, iss, sub, ...bound, argumentsHash: argumentsHash(call.arguments), status: 'pending', createdAt: now, expiresAt: now + ttlMs };
    await this.store.putValue(ValueKeys.approval(principal.userKey, approval.id), JSON.stringify(approval), call.ttlMs);
    if (await this.store.putValueIfAbsent(ValueKeys.approvalCall(principal.userKey, bindingOf(call)), approval.id, call.ttlMs)) return approval;
    await this.store.deleteValue(ValueKeys.approval(principal.userKey, approval.id));
    return (await this.forCall(principal, call)) ?? this.hold(principal, call);
  }

  /** The user's approval of that id, or undefined: unknown, expired, or another user's. */
  async get(userKey: string, id: string): Promise<Approval | undefined> {
    if (!ID.test(id)) return undefined;
    const text = await this.store.getValue(ValueKeys.approval(userKey, id));
    if (!text) return undefined;
    const approval = JSON.parse(text) as Approval;
    return approval.expiresAt > Date.now() ? approval : undefined;
  }

  /**
   * Approves or denies a pending approval, once: the decision is claimed under its own key
   * first, so of two decisions at once (two tabs, two replicas) only one is taken. Returns the
   * approval as decided, or undefined when it was decided already or has expired.
   */
  async decide(approval: Approval, status: 'approved' | 'denied'): Promise<Approval | undefined> {
    const remaining = approval.expiresAt - Date.now();
    if (approval.status !== 'pending' || remaining <= 0) return undefined;
    if (!(await this.store.putValueIfAbsent(ValueKeys.approvalDecision(approval.userKey, approval.id), status, remaining))) return undefined;
    return this.#write(approval, status);
  }

  /**
   * Uses an approved approval for the call it is bound to: the binding is deleted if it still
   * names this approval (atomically, across replicas), so it unlocks one call. False when another use took it first.
   */
  async use(approval: Approval, call: HeldCall): Promise<boolean> {
    if (approval.status !== 'approved') return false;
    if (!(await this.store.deleteValueIf(ValueKeys.approvalCall(approval.userKey, bindingOf(call)), approval.id))) return false;
    await this.#write(approval, 'used');
    return true;
  }

  async #write(approval: Approval, status: ApprovalStatus): Promise<Approval> {
    const updated = { ...approval, status };
    const remaining = approval.expiresAt - Date.now();
    if (remaining > 0) await this.store.putValue(ValueKeys.approval(approval.userKey, approval.id), JSON.stringify(updated), remaining);
    return updated;
  }
}

/** SHA-256 (hex) of the RFC 8785 canonical JSON of a call's arguments. */
export function argumentsHash(args: unknown): string {
  return createHash('sha256').update(canonicalJson(args)).digest('hex');
}

/** The digest an approval is found under: backend, tool, argument hash and policy version (the user is the key's prefix). */
function bindingOf(call: HeldCall): string {
  return createHash('sha256').update(JSON.stringify([call.backend, call.tool, argumentsHash(call.arguments), call.policyVersion])).digest('base64url');
}

/** `<publicUrl>/approve?id=…`: the page where the caller decides. */
export function approvalUrl(publicUrl: string, id: string): string {
  return `${publicUrl}/approve?id=${encodeURIComponent(id)}`;
}
