/**
 * Which MCP sessions of a user wait for a provider's account to be linked (SPEC §8
 * "Linking"): sessions the gateway answered for because the backend refused them without
 * the user's token. Once the account is linked — from a tool's elicitation or from the
 * Connect button on `/connections` — each of them hears `notifications/{list}/list_changed`
 * (MCP 2025-11-25 "Tools" §"List Changed Notification"), re-lists, and the gateway opens the
 * real backend session on that request, on whichever replica it reaches.
 *
 * One small value per user and provider, bounded in length; an entry lost to two replicas
 * writing at once costs that session only the notification: its next request still opens
 * the backend session.
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

export interface Waiter {
  sessionId: string;
  /** The lists announced to that session (`tools`, `prompts`, `resources`). */
  lists: string[];
}

/** Sessions remembered per user and provider; the oldest go first. */
const MAX_WAITERS = 32;

export class LinkWaiters {
  constructor(
    private readonly store: StateStore,
    /** As long as an idle session lives. */
    private readonly ttlMs: number,
  ) {}

  async add(userKey: string, provider: string, waiter: Waiter): Promise<void> {
    const current = (await this.#read(userKey, provider)).filter((w) => w.sessionId !== waiter.sessionId);
    const next = [...current, waiter].slice(-MAX_WAITERS);
    await this.store.putValue(key(userKey, provider), JSON.stringify(next), this.ttlMs);
  }

  /** The waiting sessions, forgotten as they are returned. */
  async take(userKey: string, provider: string): Promise<Waiter[]> {
    const text = await this.store.takeValue(key(userKey, provider));
    return text ? parse(text) : [];
  }

  async #read(userKey: string, provider: string): Promise<Waiter[]> {
    const text = await this.store.getValue(key(userKey, provider));
    return text ? parse(text) : [];
  }
}

function parse(text: string): Waiter[] {
  const value = JSON.parse(text) as unknown;
  return Array.isArray(value) ? (value as Waiter[]).filter((w) => typeof w?.sessionId === 'string' && Array.isArray(w.lists)) : [];
}

const key = ValueKeys.linkWaiters;
