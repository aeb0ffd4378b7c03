/**
 * URL-mode elicitation records (SPEC §4 step 2; MCP 2025-11-25 "Elicitation", URL mode):
 * who asked (iss+sub), from which MCP session, for which backend and provider, and where
 * the flow stands. Short-lived and single use: once complete (or declined) the link is dead.
 *
 * The connect URL carries nothing but the opaque, unguessable id. Records are found by that
 * id alone, because the connect page must be able to say "this link belongs to another
 * account" (phishing protection) — every use then compares the record's user with the
 * signed-in one before anything changes.
 */
import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

export type ElicitationStatus = 'pending' | 'complete' | 'declined';

export interface Elicitation {
  id: string;
  iss: string;
  sub: string;
  userKey: string;
  /** The MCP session to notify on completion (absent when it was asked during initialize). */
  mcpSessionId?: string;
  backend: string;
  provider: string;
  /**
   * A step-up link (MCP 2025-11-25 "Authorization", §Step-Up Authorization Flow): the scopes
   * its authorization request asks for, instead of the backend's usual ones. Kept here because
   * the connect page and the authorization request are made later, on any replica.
   */
  scopes?: string[];
  /**
   * The issuer of the authorization server the link is to be made at, as the replica that
   * made the record knew it: a replica holding an older discovery (the backend moved, issue 42
   * §6) discovers again before sending the browser anywhere.
   */
  issuer?: string;
  status: ElicitationStatus;
  createdAt: number;
  expiresAt: number;
}

export const DEFAULT_ELICITATION_TTL_MS = 15 * 60_000;

export class ElicitationStore {
  constructor(
    private readonly store: StateStore,
    private readonly ttlMs = DEFAULT_ELICITATION_TTL_MS,
  ) {}

  async create(principal: Principal, origin: { mcpSessionId?: string; backend: string; provider: string; scopes?: string[]; issuer?: string }): Promise<Elicitation> {
    const now = Date.now();
    const elicitation: Elicitation = {
      id: randomBytes(24).toString('base64url'),
      iss: principal.iss,
      sub: principal.sub,
      userKey: principal.userKey,
      ...(origin.mcpSessionId ? { mcpSessionId: origin.mcpSessionId } : {}),
      backend: origin.backend,
      provider: origin.provider,
      ...(origin.scopes ? { scopes: origin.scopes } : {}),
      ...(origin.issuer ? { issuer: origin.issuer } : {}),
      status: 'pending',
      createdAt: now,
      expiresAt: now + this.ttlMs,
    };
    await this.store.putValue(key(elicitation.id), JSON.stringify(elicitation), this.ttlMs);
    return elicitation;
  }

  /** The record, or undefined when unknown or expired. */
  async get(id: string): Promise<Elicitation | undefined> {
    if (!/^[A-Za-z0-9_-]{32}$/.test(id)) return undefined;
    const text = await this.store.getValue(key(id));
    if (!text) return undefined;
    const elicitation = JSON.parse(text) as Elicitation;
    return elicitation.expiresAt > Date.now() ? elicitation : undefined;
  }

  async remove(id: string): Promise<void> {
    await this.store.deleteValue(key(id));
  }

  /** Records a new status; the record keeps its original expiry. */
  async setStatus(elicitation: Elicitation, status: ElicitationStatus): Promise<Elicitation> {
    const updated = { ...elicitation, status };
    const remaining = elicitation.expiresAt - Date.now();
    if (remaining > 0) await this.store.putValue(key(elicitation.id), JSON.stringify(updated), remaining);
    return updated;
  }
}

/** `<publicUrl>/connect?elicitationId=…` — the only thing the client ever sees of the flow. */
export function connectUrl(publicUrl: string, id: string): string {
  return `${publicUrl}/connect?elicitationId=${encodeURIComponent(id)}`;
}

const key = ValueKeys.elicitation;
