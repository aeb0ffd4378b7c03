/**
 * `backends[].pinning` and `admin` (issue 31 §2; docs/pinning.md).
 *
 * Pinning guards against a backend changing a tool's description or schema after users
 * approved it ("rug pull", tool poisoning): the gateway remembers each tool's definition and
 * acts on a change by `mode` — `off` (the default: nothing is remembered, nothing costs),
 * `log`, `hold` or `block`. `lockfile` makes a file written by `switchboard pins export` the
 * pins, read-only, instead of the definitions first seen (src/pinning/).
 *
 * `scope` says whose the pins are (issue 41 §2). A backend may answer `tools/list` differently
 * per user (linked accounts, `clientInfo`, tenants), so by default (`user`) each user of the
 * gateway has pins of their own: first sight, a change and its pending approval are that
 * user's, and nothing from one user's list is served to, or judged against, another. `backend`
 * is the operator's word that the backend answers every user alike: one pin per tool, and a
 * change seen in any user's list is a change for all (hold mode still serves a user only a
 * pinned definition the operator approved or that user's own list held).
 *
 * `admin.token` opens `POST /admin/pins/approve` on the metrics listener (`metrics.listen`),
 * for approving a change without the command line; without it there is no admin route.
 */
import { z } from 'zod';

export const PINNING_MODES = ['off', 'log', 'hold', 'block'] as const;
export const PINNING_SCOPES = ['user', 'backend'] as const;
export type PinningScope = (typeof PINNING_SCOPES)[number];

export const pinningSchema = z
  .object({
    mode: z.enum(PINNING_MODES, { errorMap: () => ({ message: `must be one of ${PINNING_MODES.join(', ')}` }) }).default('off'),
    /** Whose pins: each user's own (`user`), or one set for the backend, which the operator asserts answers every user alike (`backend`). */
    scope: z.enum(PINNING_SCOPES, { errorMap: () => ({ message: `must be one of ${PINNING_SCOPES.join(', ')}` }) }).default('user'),
    /** A pins file written by `switchboard pins export` (JSON); relative paths are read from the working directory. */
    lockfile: z.string().min(1, 'must be a file path').optional(),
  })
  .strict();

export const adminSchema = z
  .object({
    /** Bearer token of the admin routes on the metrics listener (use `${VAR}`); no token, no admin route. */
    token: z.string().min(32, 'must be at least 32 characters (it approves tool definitions for every user)').optional(),
  })
  .strict();
