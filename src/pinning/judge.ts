/**
 * What a pinned backend's `tools/list` page becomes (issue 31 §2), tool by tool:
 *
 * - seen first (no pin): recorded as the pin (SET NX: replicas seeing it at once agree on one)
 *   and served; with a lockfile, a tool the file lacks is a change with no pin to fall back on;
 * - the pinned fingerprint: served; a change still pending for it is withdrawn (the backend
 *   went back to the approved definition);
 * - another fingerprint: a change, recorded as pending and reported once per fingerprint
 *   (audit, metric, `pins-changed` to every replica), then by mode: `log` serves the new
 *   definition, `hold` the pinned one (none pinned: left out), `block` leaves the tool out.
 *
 * A page is judged once per {@link PinBook.version}: the verdict is cached by the page's
 * digest, so a list answered again costs one hash of it.
 */
import { canonicalJson } from '../ops/canonical-json.js';
import { fingerprint, isToolDefinition, sha256 } from './fingerprint.js';
import type { Pin, PinBook } from './pin-book.js';

export type PinMode = 'log' | 'hold' | 'block';

/** Told of a change the first time any replica sees its fingerprint. */
export type ChangeReport = (book: PinBook, tool: string, mode: PinMode, pinned: Pin | undefined, seen: Pin) => void;

const CACHE_MAX = 256;

export class ListJudge {
  readonly #verdicts = new Map<string, { version: number; tools: unknown[] }>();

  constructor(
    private readonly book: PinBook,
    private readonly mode: PinMode,
    private readonly report: ChangeReport,
  ) {}

  async judge(tools: unknown[]): Promise<unknown[]> {
    await this.book.load();
    const digest = sha256(canonicalJson(tools));
    const cached = this.#verdicts.get(digest);
    if (cached && cached.version === this.book.version) return cached.tools;
    const out: unknown[] = [];
    for (const tool of tools) {
      const served = isToolDefinition(tool) ? await this.#judgeOne(tool) : tool;
      if (served !== undefined) out.push(served);
    }
    if (this.#verdicts.size >= CACHE_MAX) this.#verdicts.clear();
    this.#verdicts.set(digest, { version: this.book.version, tools: out });
    return out;
  }

  async #judgeOne(tool: Record<string, unknown> & { name: string }): Promise<unknown> {
    const seen: Pin = { fingerprint: fingerprint(tool), tool, at: new Date().toISOString() };
    let pinned = this.book.pin(tool.name);
    if (!pinned && !this.book.readOnly) {
      if (await this.book.recordFirstSight(tool.name, seen)) return tool;
      pinned = this.book.pin(tool.name);
    }
    if (pinned?.fingerprint === seen.fingerprint) {
      if (this.book.pending(tool.name)) await this.book.clearChange(tool.name);
      return tool;
    }
    if (this.book.pending(tool.name)?.fingerprint !== seen.fingerprint && (await this.book.recordChange(tool.name, seen))) {
      this.report(this.book, tool.name, this.mode, pinned, seen);
    }
    if (this.mode === 'log') return tool;
    if (this.mode === 'hold') return pinned?.tool;
    return undefined;
  }
}
