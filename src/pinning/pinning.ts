/**
 * Tool-definition pinning for the whole gateway (issue 31 §2, issue 41 §2; docs/pinning.md):
 * the books of pins this replica holds, the face put on each pinned backend, what a change
 * does besides the answer (metric, audit, log, `pins-changed` to every replica), what a
 * `pins-changed` from any replica does here (the pins are read again; after an approval, live
 * sessions hear `notifications/tools/list_changed`), and users whose definitions differ.
 *
 * With `pinning.scope: user` (the default) each user has a book per backend, read from the
 * store the first time this replica serves that user and kept in a bounded map, least recently
 * used dropped first ({@link USER_BOOKS_MAX}): a `tools/call` still costs a map lookup, a user
 * dropped costs one store read when they come back. With `scope: backend` one book serves all.
 */
import { readFileSync } from 'node:fs';
import type { FastifyBaseLogger } from 'fastify';
import type { McpBackend } from '../backends/backend.js';
import type { BackendConfig } from '../config/schema.js';
import type { Audit } from '../ops/audit.js';
import type { Metrics } from '../ops/metrics.js';
import type { PinsMessage } from '../state/coordinator.js';
import type { StateStore } from '../state/store.js';
import type { JudgeReports } from './judge.js';
import { PinBook, parsePins, type Pin, type PinsFile } from './pin-book.js';
import { PinningBackend } from './pinning-backend.js';
import { schemaChecks } from './schema-check.js';
import { approvePending } from './stored-pins.js';
import { checkVariants } from './variants.js';

export interface PinningParts {
  store: StateStore;
  broadcast(message: PinsMessage): Promise<void>;
  metrics: Metrics;
  /** The audit as it is now (a reload may open another sink or turn it off: ops/live-audit.ts). */
  audit(): Audit | undefined;
  log: FastifyBaseLogger;
  /** Tells this replica's live sessions that reach `backend` that their tool list changed. */
  listChanged(backend: string): void;
}

/** Users' books kept on one replica, all backends together. */
export const USER_BOOKS_MAX = 2048;

/** What a pinned backend's books share: its scope, its lockfile's pins, and with `scope: backend` its one book. */
interface Shelf {
  backend: string;
  locked?: ReadonlyMap<string, Pin>;
  shared?: PinBook;
}

export class Pinning {
  readonly #shelves = new Map<string, Shelf>();
  /** `{backend}\n{userKey}` → that user's book, least recently used first. */
  readonly #userBooks = new Map<string, PinBook>();

  constructor(private readonly parts: PinningParts) {}

  /** The backend with its pins in front; a backend with `pinning.mode: off` as it is. */
  face(backend: McpBackend): McpBackend {
    const { mode } = backend.config.pinning;
    if (mode === 'off') return backend;
    const shelf = this.#shelfFor(backend.config);
    return new PinningBackend(backend, (user) => this.#book(shelf, user), mode, this.#reports);
  }

  /** Ends hold mode's schema-check worker (schema-check.ts), which would keep the process alive after the gateway closed. */
  close(): Promise<void> {
    return schemaChecks.close();
  }

  /** Another replica (or this one) said the pins of a backend changed: of one user, or of all. */
  received(message: PinsMessage): void {
    this.#shelves.get(message.backend)?.shared?.invalidate();
    if (message.user !== undefined) this.#userBooks.get(`${message.backend}\n${message.user}`)?.invalidate();
    else this.#dropUserBooks(message.backend);
    if (message.approved) this.parts.listChanged(message.backend);
  }

  /** Approves the pending changes of a backend (one tool or all) in every user's book, and tells every replica. */
  async approve(backend: string, tool?: string): Promise<string[]> {
    const approved = await approvePending(this.parts.store, backend, tool);
    if (approved.length) await this.parts.broadcast({ type: 'pins-changed', backend, approved: true });
    return approved;
  }

  /** The book a call of `user` is judged by: the user's own, or the backend's. */
  #book(shelf: Shelf, user: string): PinBook {
    if (shelf.shared) return shelf.shared;
    const key = `${shelf.backend}\n${user}`;
    let book = this.#userBooks.get(key);
    if (book) this.#userBooks.delete(key);
    else book = new PinBook(shelf.backend, this.parts.store, shelf.locked, user);
    this.#userBooks.set(key, book);
    if (this.#userBooks.size > USER_BOOKS_MAX) this.#userBooks.delete(this.#userBooks.keys().next().value!);
    return book;
  }

  #shelfFor(config: BackendConfig): Shelf {
    const known = this.#shelves.get(config.name);
    const { lockfile, scope } = config.pinning;
    // The store's pins are kept across reloads; a lockfile is read again (the operator may have replaced it).
    if (known && !known.locked && !lockfile && (scope === 'backend') === (known.shared !== undefined)) return known;
    const locked = lockfile ? readLockfile(lockfile, config.name) : undefined;
    const shelf: Shelf = { backend: config.name, locked, shared: scope === 'backend' ? new PinBook(config.name, this.parts.store, locked) : undefined };
    this.#shelves.set(config.name, shelf);
    this.#dropUserBooks(config.name);
    return shelf;
  }

  #dropUserBooks(backend: string): void {
    for (const [key, book] of this.#userBooks) if (book.backend === backend) this.#userBooks.delete(key);
  }

  readonly #reports: JudgeReports = {
    changed: (book, tool, mode, pinned, seen, first) => {
      if (first) {
        const fields = { backend: book.backend, tool, mode, pinned: pinned?.fingerprint, seen: seen.fingerprint };
        this.parts.metrics.toolDefinitionChanges.inc({ backend: book.backend, mode });
        this.parts.audit()?.toolDefinitionChanged(fields);
        this.parts.log.warn({ ...fields, pinnedFrom: pinnedFrom(book, pinned, seen) }, 'tool definition changed from its pin');
      }
      void this.parts.broadcast({ type: 'pins-changed', backend: book.backend, ...(book.user === undefined ? {} : { user: book.user }) }).catch((err: Error) => this.parts.log.warn({ err: err.message }, 'could not tell the other replicas of a pin change'));
    },
    firstSeen: (book, sights) => {
      const report = (backend: string, tool: string, first: string, seen: string) => {
        this.parts.metrics.toolDefinitionUserVariants.inc({ backend });
        this.parts.log.warn({ backend, tool, first, seen }, 'users see different definitions of this tool: each keeps their own pin (pinning.scope user)');
      };
      checkVariants(this.parts.store, book.backend, sights, report).catch((err: Error) => this.parts.log.warn({ err: err.message, backend: book.backend }, 'could not compare tool definitions between users'));
    },
  };
}

/** Where the pin a change is judged against came from, for the log (never whose it was). */
function pinnedFrom(book: PinBook, pinned: Pin | undefined, seen: Pin): string {
  if (!pinned) return 'none';
  if (book.readOnly) return 'lockfile';
  if (pinned.approvedAt) return 'approval';
  return pinned.by === seen.by ? 'this user' : 'another user';
}

/**
 * The pins of one backend from a lockfile (`switchboard pins export`). A file that cannot be
 * read or is not a pins file stops the start (or the reload) with its path: running without
 * the pins the operator meant would let every change through.
 */
export function readLockfile(path: string, backend: string): Map<string, Pin> {
  let file: PinsFile;
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as PinsFile;
  } catch (err) {
    throw new Error(`pinning.lockfile of backend "${backend}": cannot read ${path}: ${(err as Error).message}`);
  }
  if (file?.schema !== 'switchboard.pins/v1' || typeof file.backends !== 'object') throw new Error(`pinning.lockfile of backend "${backend}": ${path} is not a pins file (schema switchboard.pins/v1, written by switchboard pins export)`);
  const pins = file.backends[backend] ?? {};
  return parsePins(Object.fromEntries(Object.entries(pins).map(([name, pin]) => [name, JSON.stringify(pin)])));
}
