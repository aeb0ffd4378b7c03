/**
 * The per-user bound on the gateway's own sessions with 2025-11-25 backends, opened for one
 * user's MCP 2026-07-28 calls (legacy-sessions.ts; issue 28 §5, `stateless.maxSessionsPerUser`).
 * Each such session holds a backend session, a GET stream kept open on a replica and a record in
 * the store; without a bound one user opened sixty by varying `clientCapabilities`, where the
 * session path holds a user to `sessions.maxPerUser` (SPEC §8, "Budgets").
 *
 * The bound holds across replicas with the store's one atomic primitive: a user has
 * `maxSessionsPerUser` slots, and a new session takes the first free one with a set-if-absent
 * naming the session's store key, for the session's lifetime. A session that ends or is
 * replaced gives its slot back (only while the slot still names it). Claiming costs a round
 * trip per slot tried, paid only when a session is opened, never per call.
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

/** The user holds as many bridge sessions as `stateless.maxSessionsPerUser` allows. */
export class SessionBudgetSpent extends Error {
  constructor(readonly max: number) {
    super(`too many sessions of this user with 2025-era backends are open (stateless.maxSessionsPerUser ${max})`);
  }
}

export interface SessionBudget {
  store: StateStore;
  userKey: string;
  max: number;
  ttlMs: number;
}

/** Takes a free slot for the session stored under `holder`; throws SessionBudgetSpent when none is free. */
export async function claimSlot(budget: SessionBudget, holder: string): Promise<number> {
  for (let slot = 0; slot < budget.max; slot++) {
    if (await budget.store.putValueIfAbsent(ValueKeys.bridgeSessionSlot(budget.userKey, slot), holder, budget.ttlMs)) return slot;
  }
  throw new SessionBudgetSpent(budget.max);
}

/** Gives the slot back, if it still names `holder` (it may have expired and been taken since). */
export async function releaseSlot(budget: Pick<SessionBudget, 'store' | 'userKey'>, slot: number, holder: string): Promise<void> {
  await budget.store.deleteValueIf(ValueKeys.bridgeSessionSlot(budget.userKey, slot), holder);
}
