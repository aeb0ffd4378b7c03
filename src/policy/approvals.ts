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
 *
 * A four-eyes request (the rule names `approvers`) is also listed in its rule's queue
 * (approval-index.ts), where a matching approver finds it by its id: it stays under the
 * caller's key, and only the queues of rules whose `approvers` the viewer's claims match are
 * read (connect/approval-routes.ts). Each step of a request's life is told to
 * {@link ApprovalEvents} (approval-events.ts: the audit records and the `approvals.notify` webhook).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { canonicalJson } from '../ops/canonical-json.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import { ApprovalIndex, type ApprovalEventsSink, type OpenEntry } from './approval-index.js';
import { displayName, type Approvers } from './approvers.js';

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
  /** Four-eyes: who else must decide (the rule's `approvers.claims`); absent when the caller decides. */
  approvers?: Approvers;
  /** Through a virtual server: the server and tool names the client saw (the binding is the real backend's and tool's). */
  shownAs?: { server: string; tool: string };
  /** The OAuth client the access token was issued to (`client_id`, else `azp`), if it names one; the page shows its registered name. */
  clientId?: string;
  /** The caller as their access token names them (name, username or email; else `sub`). */
  callerLabel: string;
  /** Who decided, once decided: their user key and name (the audit writes the key's digest). */
  decidedBy?: { userKey: string; label: string };
  status: ApprovalStatus;
  createdAt: number;
  expiresAt: number;
}

/** Each step of a request's life: requested, decided (approved or denied), used, expired (approval-events.ts). */
export interface ApprovalEvents extends ApprovalEventsSink {
  requested(approval: Approval): void;
  decided(approval: Approval): void;
  used(approval: Approval): void;
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
  approvers?: Approvers;
  shownAs?: { server: string; tool: string };
}

const ID = /^[A-Za-z0-9_-]{32}$/;

export class ApprovalStore {
  readonly index: ApprovalIndex;

  constructor(
    private readonly store: StateStore,
    private readonly events?: ApprovalEvents,
  ) {
    this.index = new ApprovalIndex(store, events);
  }

  /** The approval bound to this call, whatever its status; undefined when none lives. */
  async forCall(principal: Principal, call: HeldCall): Promise<Approval | undefined> {
    const id = await this.store.getValue(ValueKeys.approvalCall(principal.userKey, bindingOf(call)));
    return id ? this.get(principal.userKey, id) : undefined;
  }

  /**
   * A new pending approval for the call; an approval another replica bound to it first is
   * returned instead. Undefined when the caller, or the four-eyes rule's queue, has as many
   * open requests as it may (approval-index.ts): the call is then refused.
   */
  async hold(principal: Principal, call: HeldCall): Promise<Approval | undefined> {
    if (!(await this.index.room(principal.userKey, call.rule, call.approvers !== undefined))) return undefined;
    const now = Date.now();
    const { ttlMs, ...bound } = call;
    const { userKey, iss, sub } = principal;
    // Undefined texts (a tool never listed here) and approvers vanish in the JSON.
    const clientId = clientIdOf(principal.claims);
    const approval: Approval = { id: randomBytes(24).toString('base64url'), userKey, iss, sub, ...bound, ...(clientId ? { clientId } : {}), argumentsHash: argumentsHash(call.arguments), callerLabel: displayName(principal.claims, sub), status: 'pending', createdAt: now, expiresAt: now + ttlMs };
    await this.store.putValue(ValueKeys.approval(principal.userKey, approval.id), JSON.stringify(approval), call.ttlMs);
    if (await this.store.putValueIfAbsent(ValueKeys.approvalCall(principal.userKey, bindingOf(call)), approval.id, call.ttlMs)) {
      await this.index.add(openEntry(approval));
      this.events?.requested(approval);
      return approval;
    }
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
   * A four-eyes request found by someone else than its caller: in the queue of one of `rules`
   * (the rules whose `approvers` the viewer's claims match), or among those the viewer decided.
   * Whether they may decide it is still the routes' check (approvers.ts mayApprove).
   */
  async forApprover(viewerKey: string, id: string, rules: readonly string[]): Promise<Approval | undefined> {
    if (!ID.test(id)) return undefined;
    const decided = await this.store.getValue(ValueKeys.approvalDecidedBy(viewerKey, id));
    if (decided) return this.get(decided, id);
    for (const rule of rules) {
      const entry = (await this.index.queued(rule)).find((e) => e.id === id);
      if (entry) return this.get(entry.userKey, id);
    }
    return undefined;
  }

  /**
   * Approves or denies a pending approval, once: the decision is claimed under its own key
   * first, so of two decisions at once (two tabs, two replicas) only one is taken. Returns the
   * approval as decided, or undefined when it was decided already or has expired. Who may
   * decide is the routes' check (the caller, or a matching approver who is not the caller).
   */
  async decide(approval: Approval, status: 'approved' | 'denied', by: { userKey: string; label: string }): Promise<Approval | undefined> {
    const remaining = approval.expiresAt - Date.now();
    if (approval.status !== 'pending' || remaining <= 0) return undefined;
    if (!(await this.store.putValueIfAbsent(ValueKeys.approvalDecision(approval.userKey, approval.id), status, remaining))) return undefined;
    const decided = await this.#write({ ...approval, decidedBy: { userKey: by.userKey, label: by.label } }, status);
    // The approver finds what they decided again (to read "already decided"), though it left the queue.
    if (by.userKey !== approval.userKey) await this.store.putValue(ValueKeys.approvalDecidedBy(by.userKey, approval.id), approval.userKey, remaining);
    await this.index.closed(approval, status === 'denied');
    this.events?.decided(decided);
    return decided;
  }

  /**
   * Uses an approved approval for the call it is bound to: the binding is deleted if it still
   * names this approval (atomically, across replicas), so it unlocks one call. False when another use took it first.
   */
  async use(approval: Approval, call: HeldCall): Promise<boolean> {
    if (approval.status !== 'approved') return false;
    if (!(await this.store.deleteValueIf(ValueKeys.approvalCall(approval.userKey, bindingOf(call)), approval.id))) return false;
    const used = await this.#write(approval, 'used');
    await this.index.closed(approval, true);
    this.events?.used(used);
    return true;
  }

  async #write(approval: Approval, status: ApprovalStatus): Promise<Approval> {
    const updated = { ...approval, status };
    const remaining = approval.expiresAt - Date.now();
    if (remaining > 0) await this.store.putValue(ValueKeys.approval(approval.userKey, approval.id), JSON.stringify(updated), remaining);
    return updated;
  }
}

/** What the indexes keep of an approval. */
export function openEntry(a: Approval): OpenEntry {
  return { id: a.id, userKey: a.userKey, rule: a.rule, backend: a.backend, tool: a.tool, argumentsHash: a.argumentsHash, expiresAt: a.expiresAt, fourEyes: a.approvers !== undefined, callerLabel: a.callerLabel };
}

/** The client an access token was issued to: RFC 9068 `client_id`, else OIDC `azp` (bounded; not a secret). */
function clientIdOf(claims: Readonly<Record<string, unknown>>): string | undefined {
  const id = typeof claims.client_id === 'string' ? claims.client_id : typeof claims.azp === 'string' ? claims.azp : undefined;
  return id?.trim() ? id.trim().slice(0, 500) : undefined;
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
