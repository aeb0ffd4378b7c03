/**
 * Tool-definition pinning for the whole gateway (issue 31 §2; docs/pinning.md): one
 * {@link PinBook} per pinned backend on this replica, the face put on each pinned backend,
 * what a change does besides the answer (metric, audit, log, `pins-changed` to every replica),
 * and what a `pins-changed` from any replica does here (the pins are read again; after an
 * approval, live sessions hear `notifications/tools/list_changed`).
 */
import { readFileSync } from 'node:fs';
import type { FastifyBaseLogger } from 'fastify';
import type { McpBackend } from '../backends/backend.js';
import type { BackendConfig } from '../config/schema.js';
import type { Audit } from '../ops/audit.js';
import type { Metrics } from '../ops/metrics.js';
import type { PinsMessage } from '../state/coordinator.js';
import type { StateStore } from '../state/store.js';
import type { ChangeReport } from './judge.js';
import { approvePending, PinBook, parsePins, type Pin, type PinsFile } from './pin-book.js';
import { PinningBackend } from './pinning-backend.js';

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

export class Pinning {
  readonly #books = new Map<string, PinBook>();

  constructor(private readonly parts: PinningParts) {}

  /** The backend with its pins in front; a backend with `pinning.mode: off` as it is. */
  face(backend: McpBackend): McpBackend {
    const { mode } = backend.config.pinning;
    if (mode === 'off') return backend;
    return new PinningBackend(backend, this.#bookFor(backend.config), mode, this.#report);
  }

  /** Another replica (or this one) said the pins of a backend changed. */
  received(message: PinsMessage): void {
    this.#books.get(message.backend)?.invalidate();
    if (message.approved) this.parts.listChanged(message.backend);
  }

  /** Approves the pending changes of a backend (one tool or all) and tells every replica. */
  async approve(backend: string, tool?: string): Promise<string[]> {
    const approved = await approvePending(this.parts.store, backend, tool);
    if (approved.length) await this.parts.broadcast({ type: 'pins-changed', backend, approved: true });
    return approved;
  }

  #bookFor(config: BackendConfig): PinBook {
    const known = this.#books.get(config.name);
    const lockfile = config.pinning.lockfile;
    // The store's pins are kept across reloads; a lockfile is read again (the operator may have replaced it).
    if (known && !known.readOnly && !lockfile) return known;
    const book = new PinBook(config.name, this.parts.store, lockfile ? readLockfile(lockfile, config.name) : undefined);
    this.#books.set(config.name, book);
    return book;
  }

  readonly #report: ChangeReport = (book, tool, mode, pinned, seen) => {
    this.parts.metrics.toolDefinitionChanges.inc({ backend: book.backend, mode });
    this.parts.audit()?.toolDefinitionChanged({ backend: book.backend, tool, mode, pinned: pinned?.fingerprint, seen: seen.fingerprint });
    this.parts.log.warn({ backend: book.backend, tool, mode, pinned: pinned?.fingerprint, seen: seen.fingerprint }, 'tool definition changed from its pin');
    void this.parts.broadcast({ type: 'pins-changed', backend: book.backend }).catch((err: Error) => this.parts.log.warn({ err: err.message }, 'could not tell the other replicas of a pin change'));
  };
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
