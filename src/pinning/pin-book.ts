/**
 * One book of pins, as this replica knows it (issue 31 §2, issue 41 §2): the pinned definition
 * of each tool and the changed definitions waiting for approval. Whose book it is follows
 * `pinning.scope` (docs/pinning.md):
 *
 * - `user` (the default): one user's pins of one backend (`{userKey}:pins:{backend}`,
 *   `{userKey}:pins-pending:{backend}`; the user key is the opaque digest of iss+sub,
 *   auth/principal.ts). What one user's list held is never in another user's book;
 * - `backend`: the backend's pins, shared by every user (`pins:{backend}`, `pins-pending:{backend}`).
 *
 * With `pinning.lockfile` the pins are the file's, whatever the scope (operator data,
 * read-only: first sight records nothing); pending changes are still the book's own.
 *
 * Kept in memory once read, so a `tools/call` costs a map lookup; read again after any replica
 * reports a change or an approval (a `pins-changed` broadcast, pinning.ts). `version` grows with
 * every change, so answers judged before it are judged again.
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import type { ToolDefinition } from './fingerprint.js';

export interface Pin {
  fingerprint: string;
  tool: ToolDefinition;
  /** ISO time it was recorded. */
  at: string;
  /** Whose list held it when it was recorded on first sight (or seen as a change): an opaque user key. */
  by?: string;
  /** When an operator approved it (`switchboard pins approve`, the admin route): then it is the operator's pin. */
  approvedAt?: string;
}

/** The pins of every backend, as `switchboard pins export` writes them. */
export interface PinsFile {
  schema: 'switchboard.pins/v1';
  backends: Record<string, Record<string, Pin>>;
}

/** The user of a call that names none (no verified caller): a book of its own, nobody's list. */
export const NO_USER = '-';

/** The store keys of a book: the backend's (`user` undefined) or one user's. */
export function bookKeys(backend: string, user?: string): { pins: string; pending: string } {
  return user === undefined ? { pins: ValueKeys.pins(backend), pending: ValueKeys.pinsPending(backend) } : { pins: ValueKeys.userPins(user, backend), pending: ValueKeys.userPinsPending(user, backend) };
}

export class PinBook {
  #pins = new Map<string, Pin>();
  #pending = new Map<string, Pin>();
  #loaded: Promise<void> | undefined;
  #listed = false;
  readonly #keys: { pins: string; pending: string };
  version = 0;

  constructor(
    readonly backend: string,
    private readonly store: StateStore,
    /** The lockfile's pins of this backend; undefined: the store's. */
    private readonly locked?: ReadonlyMap<string, Pin>,
    /** The user whose book this is (`pinning.scope: user`); undefined: the backend's, every user's. */
    readonly user?: string,
  ) {
    this.#keys = bookKeys(backend, user);
  }

  get readOnly(): boolean {
    return this.locked !== undefined;
  }

  /** Reads the pins once (again after {@link invalidate}). */
  load(): Promise<void> {
    this.#loaded ??= this.#read().catch((err: unknown) => {
      this.#loaded = undefined;
      throw err;
    });
    return this.#loaded;
  }

  invalidate(): void {
    this.#loaded = undefined;
    this.version++;
  }

  pin(tool: string): Pin | undefined {
    return this.#pins.get(tool);
  }

  /**
   * The pending changes read again from the store, for calls about to be judged in block or
   * hold mode. Another replica may have recorded a change since this book was read — a list
   * answered there, the user's next call here — and its pins-changed notice may not have
   * arrived yet: judged from the book alone, that call went to the backend with the changed
   * definition nobody approved (seen in pin-scope.e2e under load). The change is stored
   * before the list that found it is answered, so one read of the pending hash (usually
   * empty) here sees it: fail closed across replicas.
   */
  async refreshPending(): Promise<void> {
    const pending = parsePins(await this.store.getFields(this.#keys.pending));
    if (!samePins(pending, this.#pending)) {
      this.#pending = pending;
      this.version++;
    }
  }

  /**
   * The book as the store has it now, for calls judged in block or hold mode: a first read when
   * this call is the one that starts it (fresh by construction), else the pending changes read
   * again ({@link refreshPending}) — one read of the pending hash per call, not two on the first.
   * A read another call started earlier may predate the change, so it is not taken as fresh.
   */
  async loadFresh(): Promise<void> {
    if (this.#loaded === undefined) return this.load();
    await this.#loaded;
    await this.refreshPending();
  }

  /** The changed definition waiting for approval, if the tool's current one differs from its pin. */
  pending(tool: string): Pin | undefined {
    return this.#pending.get(tool);
  }

  /**
   * Whether hold mode may serve `user` this pin in place of a changed definition: a definition
   * the operator gave (lockfile) or approved, or one recorded from this same user's list —
   * never one that only another user's list held.
   */
  servable(pin: Pin, user: string): boolean {
    return this.readOnly || pin.approvedAt !== undefined || (pin.by !== undefined && pin.by === user);
  }

  /** Records a first sight; false when another replica recorded the tool first (its pin is then read). */
  async recordFirstSight(name: string, pin: Pin): Promise<boolean> {
    if (this.locked) return false;
    const won = await this.store.putFieldIfAbsent(this.#keys.pins, name, JSON.stringify(pin));
    if (won) {
      this.#pins.set(name, pin);
      // The user's book is listed once per replica and book, for `pins export`.
      if (this.user !== undefined && !this.#listed) {
        this.#listed = true;
        await this.store.putFieldIfAbsent(ValueKeys.pinUsers(this.backend), this.user, pin.at);
      }
    } else await this.#read();
    return won;
  }

  /** Records a changed definition as pending; true when this replica is the first to report this fingerprint. */
  async recordChange(name: string, pin: Pin): Promise<boolean> {
    this.#pending.set(name, pin);
    this.version++;
    await this.store.putField(this.#keys.pending, name, JSON.stringify(pin));
    // After the change itself: an approval that races it finds the user again (stored-pins.ts).
    if (this.user !== undefined) await this.store.putField(ValueKeys.pinPendingUsers(this.backend), this.user, pin.at);
    return this.store.putValueIfAbsent(ValueKeys.pinChangeReported(this.backend, name, pin.fingerprint), '1', REPORT_MEMORY_MS);
  }

  /** The backend serves the pinned definition again: nothing waits for approval. */
  async clearChange(name: string): Promise<void> {
    this.#pending.delete(name);
    this.version++;
    await this.store.deleteField(this.#keys.pending, name);
  }

  async #read(): Promise<void> {
    const [pins, pending] = await Promise.all([this.locked ? undefined : this.store.getFields(this.#keys.pins), this.store.getFields(this.#keys.pending)]);
    this.#pins = this.locked ? new Map(this.locked) : parsePins(pins!);
    this.#pending = parsePins(pending);
    this.version++;
  }
}

/** A change to one fingerprint is reported once in this long, whichever replica sees it. */
export const REPORT_MEMORY_MS = 30 * 24 * 3600_000;

function samePins(a: ReadonlyMap<string, Pin>, b: ReadonlyMap<string, Pin>): boolean {
  if (a.size !== b.size) return false;
  for (const [name, pin] of a) if (b.get(name)?.fingerprint !== pin.fingerprint) return false;
  return true;
}

export function parsePins(fields: Record<string, string>): Map<string, Pin> {
  const out = new Map<string, Pin>();
  for (const [name, text] of Object.entries(fields)) {
    try {
      const pin = JSON.parse(text) as Pin;
      if (typeof pin.fingerprint === 'string' && pin.tool && typeof pin.tool === 'object') out.set(name, pin);
    } catch {
      // a field this version cannot read is no pin: the tool is seen again
    }
  }
  return out;
}
