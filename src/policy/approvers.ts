/**
 * Who may decide a held call (issue 46 §1, §3): without `approvers`, its caller; with them
 * (four-eyes), a signed-in user whose ID-token claims match — every claim the rule names has
 * one of its listed values, as `backends[].access.claims` are read (backend-access.ts) — and
 * never the caller (the same `iss` and `sub`), whatever their claims.
 */
import { claimValues } from './backend-access.js';

/** A `confirm` rule's `approvers.claims`: claim name → accepted values. */
export type Approvers = Readonly<Record<string, readonly string[]>>;

/** Whether claims satisfy every claim `approvers` names (one accepted value each); false without claims. */
export function approversMatch(approvers: Approvers, claims: Readonly<Record<string, unknown>> | undefined): boolean {
  if (!claims) return false;
  return Object.entries(approvers).every(([name, allowed]) => claimValues(claims, name).some((v) => allowed.includes(v)));
}

/** The names of the four-eyes rules whose `approvers` these claims match (the queues their holder may read). */
export function approverRules(rules: readonly { name: string; effect: string; approvers?: { claims: Approvers } }[], claims: Readonly<Record<string, unknown>> | undefined): string[] {
  return rules.filter((r) => r.effect === 'confirm' && r.approvers && approversMatch(r.approvers.claims, claims)).map((r) => r.name);
}

/** Whether `user` may decide a four-eyes request of `caller`: claims match, and not the caller. */
export function mayApprove(approvers: Approvers, caller: { iss: string; sub: string; userKey: string }, user: { iss: string; sub: string; userKey: string; claims?: Readonly<Record<string, unknown>> }): boolean {
  if (user.userKey === caller.userKey || (user.iss === caller.iss && user.sub === caller.sub)) return false;
  return approversMatch(approvers, user.claims);
}

/** `groups: finance-approvers or treasury; department: finance`: who may approve, as the pages show it. */
export function describeApprovers(approvers: Approvers): string {
  return Object.entries(approvers)
    .map(([name, allowed]) => `${name}: ${allowed.join(' or ')}`)
    .join('; ');
}

/** A person's display name from token claims (name, username or email), else their `sub`. */
export function displayName(claims: Readonly<Record<string, unknown>> | undefined, sub: string): string {
  for (const k of ['name', 'preferred_username', 'email']) {
    const v = claims?.[k];
    if (typeof v === 'string' && v.trim()) return v.trim().slice(0, 200);
  }
  return sub;
}
