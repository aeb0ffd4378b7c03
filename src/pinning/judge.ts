/**
 * What a pinned backend's `tools/list` page becomes for the user who listed it (issue 31 §2,
 * issue 41 §2), tool by tool, against that user's book (`pinning.scope: user`) or the
 * backend's (`scope: backend`; pin-book.ts):
 *
 * - seen first (no pin): recorded as the pin (SET NX: replicas seeing it at once agree on one),
 *   with whose list held it, and served; with a lockfile, a tool the file lacks is a change
 *   with no pin to fall back on;
 * - the pinned fingerprint: served (it is what this user's list holds); a change still pending
 *   for it is withdrawn (the backend went back to the pinned definition);
 * - another fingerprint: a change, recorded as pending and reported (audit, metric once per
 *   fingerprint; `pins-changed` to every replica), then by mode: `log` serves the new
 *   definition, `block` leaves the tool out, `hold` serves the pinned one only where the book
 *   says it may serve this user ({@link PinBook.servable}: the operator's, or recorded from this
 *   same user's list), else leaves it out. Hold never serves a definition this user's own list
 *   did not hold and no operator gave.
 *
 * A page is judged once per book version: the verdict is cached by the page's digest (and the
 * user, where the verdict depends on who lists), so a list answered again costs one hash of it.
 */
import { canonicalJson } from '../ops/canonical-json.js';
import { fingerprint, isToolDefinition, sha256 } from './fingerprint.js';
import type { Pin, PinBook } from './pin-book.js';

export type PinMode = 'log' | 'hold' | 'block';

export interface JudgeReports {
  /**
   * A change this book did not hold pending yet (the replicas are to read the book again);
   * `first`: no replica reported this fingerprint of the tool before (audit, metric, log).
   */
  changed(book: PinBook, tool: string, mode: PinMode, pinned: Pin | undefined, seen: Pin, first: boolean): void;
  /** Tools a user's book recorded on first sight in this page (compared with other users' by pinning.ts). */
  firstSeen?(book: PinBook, sights: ReadonlyArray<readonly [string, string]>): void;
}

/** Verdicts kept per book: the backend's is read by every user, a user's by one. */
const SHARED_CACHE_MAX = 256;
const USER_CACHE_MAX = 4;

/** A judged page; `tools` undefined: served as the backend sent it (nothing kept twice). */
interface Verdict {
  version: number;
  tools?: unknown[];
}

export class ListJudge {
  readonly #verdicts = new WeakMap<PinBook, Map<string, Verdict>>();

  constructor(
    private readonly mode: PinMode,
    private readonly reports: JudgeReports,
  ) {}

  /** The page as `user` is to see it. */
  async judge(book: PinBook, user: string, tools: unknown[]): Promise<unknown[]> {
    await book.load();
    const digest = sha256(canonicalJson(tools));
    const verdicts = this.#verdictsOf(book);
    for (const key of [digest, `${user}\n${digest}`]) {
      const cached = verdicts.get(key);
      if (cached?.version === book.version) return cached.tools ?? tools;
    }
    const page = { out: [] as unknown[], perUser: false, sights: [] as Array<readonly [string, string]> };
    for (const tool of tools) {
      const served = isToolDefinition(tool) ? await this.#judgeOne(book, user, tool, page) : tool;
      if (served !== undefined) page.out.push(served);
    }
    if (page.sights.length && book.user !== undefined) this.reports.firstSeen?.(book, page.sights);
    const same = page.out.length === tools.length && page.out.every((t, i) => t === tools[i]);
    if (verdicts.size >= (book.user === undefined ? SHARED_CACHE_MAX : USER_CACHE_MAX)) verdicts.clear();
    verdicts.set(page.perUser ? `${user}\n${digest}` : digest, { version: book.version, tools: same ? undefined : page.out });
    return page.out;
  }

  #verdictsOf(book: PinBook): Map<string, Verdict> {
    let verdicts = this.#verdicts.get(book);
    if (!verdicts) this.#verdicts.set(book, (verdicts = new Map()));
    return verdicts;
  }

  async #judgeOne(book: PinBook, user: string, tool: Record<string, unknown> & { name: string }, page: { perUser: boolean; sights: Array<readonly [string, string]> }): Promise<unknown> {
    const seen: Pin = { fingerprint: fingerprint(tool), tool, at: new Date().toISOString(), by: user };
    let pinned = book.pin(tool.name);
    if (!pinned && !book.readOnly) {
      if (await book.recordFirstSight(tool.name, seen)) {
        page.sights.push([tool.name, seen.fingerprint]);
        return tool;
      }
      pinned = book.pin(tool.name);
    }
    if (pinned?.fingerprint === seen.fingerprint) {
      if (book.pending(tool.name)) await book.clearChange(tool.name);
      return tool;
    }
    if (book.pending(tool.name)?.fingerprint !== seen.fingerprint) {
      const first = await book.recordChange(tool.name, seen);
      this.reports.changed(book, tool.name, this.mode, pinned, seen, first);
    }
    if (this.mode === 'log') return tool;
    if (this.mode === 'block' || !pinned) return undefined;
    // Hold: whether the pin may stand in for this user's definition depends on the user (scope: backend).
    page.perUser = true;
    return book.servable(pinned, user) ? pinned.tool : undefined;
  }
}
