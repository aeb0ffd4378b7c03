/**
 * Backends that need the user's own account (SPEC §8 "Linking", issue 12), as the MCP layer
 * and the browser flow share them: the catalog the gateway answers from while an account is
 * not linked, the sessions waiting for a link, and what happens once one exists.
 *
 * After a link (from a tool's elicitation or the Connect button on `/connections`), every
 * waiting session of that user and provider hears `notifications/{list}/list_changed` for the
 * lists it was told about (the `notifications/elicitation/complete` of the elicitation went
 * out before, from the browser flow). The client re-lists, and that request opens the real
 * backend session (backend-session.ts) on whichever replica it reaches.
 */
import type { SessionContext } from '../sessions/context.js';
import { notifySession } from '../sessions/session-notifier.js';
import { BackendCatalog } from './catalog.js';
import { LinkWaiters } from './waiters.js';

/** The session layer's context with the linking: what the aggregated endpoint and the MCP routes build on. */
export interface LinkingContext extends SessionContext {
  readonly linking: Linking;
}

export interface LinkedAccount {
  userKey: string;
  provider: string;
}

export class Linking {
  readonly catalog: BackendCatalog;
  readonly waiters: LinkWaiters;

  constructor(
    private readonly ctx: SessionContext,
    private readonly log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void },
  ) {
    this.catalog = new BackendCatalog(ctx.store, log);
    this.waiters = new LinkWaiters(ctx.store, ctx.config.sessions.idleTtl);
  }

  /** The browser flow stored the user's tokens for `provider`: tell the sessions that waited. */
  async linked(link: LinkedAccount): Promise<void> {
    const waiting = await this.waiters.take(link.userKey, link.provider);
    for (const waiter of waiting) {
      await notifyListsChanged(this.ctx, link.userKey, waiter.sessionId, waiter.lists).catch((err: Error) =>
        this.log.warn({ err: err.message, provider: link.provider }, 'could not tell a waiting session that its lists changed'),
      );
    }
    if (waiting.length) this.log.info({ provider: link.provider, sessions: waiting.length }, 'sessions told that a linked account changed their lists');
  }
}

/** `notifications/{list}/list_changed` for each list (MCP 2025-11-25 "Tools", "Prompts", "Resources"). */
export async function notifyListsChanged(ctx: SessionContext, userKey: string, sessionId: string, lists: readonly string[]): Promise<void> {
  for (const list of lists) {
    await notifySession(ctx, userKey, sessionId, JSON.stringify({ jsonrpc: '2.0', method: `notifications/${list}/list_changed` }));
  }
}
