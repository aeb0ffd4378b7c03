/**
 * Users who see different definitions of one tool (issue 41 §2), with `pinning.scope: user`:
 * not a rug pull — each user's pins are their own — but what an operator should know, since
 * a backend that answers users differently may carry one user's data in its definitions, and
 * pinning per user is what keeps it from another.
 *
 * The store keeps, per backend and tool, the fingerprint of the first definition any user's
 * book recorded (`pins-variants:{backend}`): a digest only, compared, never served. A user's
 * first sight of another fingerprint is a variant, reported once per fingerprint whichever
 * replica sees it (a warning and `switchboard_tool_definition_user_variants_total{backend}`).
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import { REPORT_MEMORY_MS } from './pin-book.js';

/** Told of a definition of `tool` that differs from the one the first user saw. */
export type VariantReport = (backend: string, tool: string, first: string, seen: string) => void;

/** Compares a user's first sights with the first user's; reports each new variant once. */
export async function checkVariants(store: StateStore, backend: string, sights: ReadonlyArray<readonly [string, string]>, report: VariantReport): Promise<void> {
  const key = ValueKeys.pinVariants(backend);
  let known = await store.getFields(key);
  for (const [tool, seen] of sights) {
    if (known[tool] === undefined) {
      if (await store.putFieldIfAbsent(key, tool, seen)) continue;
      known = await store.getFields(key);
    }
    const first = known[tool];
    if (first !== undefined && first !== seen && (await store.putValueIfAbsent(ValueKeys.pinVariantReported(backend, tool, seen), '1', REPORT_MEMORY_MS))) report(backend, tool, first, seen);
  }
}
