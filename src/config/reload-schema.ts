/**
 * The `reload` block (issue 41 §6; docs/operations-reload.md): how the gateway reads its
 * config file again when the file's directory changes (src/reload/config-watch.ts).
 *
 * `settle` is how long a plain file must stay the same (size, mtime, ctime, inode, the file
 * its path reaches) before it is read: an edit in place that truncates the file and writes it
 * in parts must not be applied between two parts, where the first part may be a valid config
 * missing a deny rule. A ConfigMap's `..data` swap, which points the path at another, finished
 * file in one rename, is read at once; so is the file on `SIGHUP`.
 */
import { z } from 'zod';
import type { DurationSchema as Duration } from './duration.js';

/** Built with the config's own duration type (schema.ts), which this file cannot import without a cycle. */
export function reloadSchema(duration: Duration) {
  return z
    .object({
      /** How long a changed plain config file must stay unchanged before it is read; 0 reads it as soon as its directory is quiet (250 ms). */
      settle: duration('2s').refine((ms) => ms <= 60_000, 'must be at most 60s'),
    })
    .strict();
}
