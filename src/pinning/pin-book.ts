/**
 * The pins of one backend, as this replica knows them (issue 31 §2): the pinned definition of
 * each tool and the changed definitions waiting for approval, read from the shared store
 * (`pins:{backend}`, `pins-pending:{backend}`, a field per tool; state/value-keys.ts) or, with
 * `pinning.lockfile`, the pins from the file (read-only: first sight records nothing).
 *
 * Kept in memory once read, so a `tools/call` costs a map lookup; read again after any replica
 * reports a change or an approval (a `pins-changed` broadcast, pinning.ts calls
 * {@link PinBook.invalidate}). `version` grows with every change, so answers judged before it
 * are judged again.
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import type { ToolDefinition } from './fingerprint.js';

export interface Pin {
  fingerprint: string;
  tool: ToolDefinition;
  /** ISO time it was recorded. */
  at: string;
}

/** The pins of every backend, as `switchboard pins export` writes them. */
export interface PinsFile {
  schema: 'switchboard.pins/v1';
  backends: Record<string, Record<string, Pin>>;
}

export class PinBook {
  #pins = new Map<string, Pin>();
  #pending = new Map<string, Pin>();
  #loaded: Promise<void> | undefined;
  version = 0;

  constructor(
    readonly backend: string,
    private readonly store: StateStore,
    /** The lockfile's pins of this backend; undefined: the store's. */
    private readonly locked?: ReadonlyMap<string, Pin>,
  ) {}

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

  /** The changed definition waiting for approval, if the tool's current one differs from its pin. */
  pending(tool: string): Pin | undefined {
    return this.#pending.get(tool);
  }

  /** Records a first sight; false when another replica recorded the tool first (its pin is then read). */
  async recordFirstSight(name: string, pin: Pin): Promise<boolean> {
    if (this.locked) return false;
    const won = await this.store.putFieldIfAbsent(ValueKeys.pins(this.backend), name, JSON.stringify(pin));
    if (won) this.#pins.set(name, pin);
    else await this.#read();
    return won;
  }

  /** Records a changed definition as pending; true when this replica is the first to report this fingerprint. */
  async recordChange(name: string, pin: Pin): Promise<boolean> {
    this.#pending.set(name, pin);
    this.version++;
    await this.store.putField(ValueKeys.pinsPending(this.backend), name, JSON.stringify(pin));
    return this.store.putValueIfAbsent(ValueKeys.pinChangeReported(this.backend, name, pin.fingerprint), '1', REPORT_MEMORY_MS);
  }

  /** The backend serves the pinned definition again: nothing waits for approval. */
  async clearChange(name: string): Promise<void> {
    this.#pending.delete(name);
    this.version++;
    await this.store.deleteField(ValueKeys.pinsPending(this.backend), name);
  }

  async #read(): Promise<void> {
    const [pins, pending] = await Promise.all([this.locked ? undefined : this.store.getFields(ValueKeys.pins(this.backend)), this.store.getFields(ValueKeys.pinsPending(this.backend))]);
    this.#pins = this.locked ? new Map(this.locked) : parsePins(pins!);
    this.#pending = parsePins(pending);
    this.version++;
  }
}

/** A change to one fingerprint is reported once in this long, whichever replica sees it. */
const REPORT_MEMORY_MS = 30 * 24 * 3600_000;

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

/**
 * Approves the pending changes of a backend (one tool, or all): each becomes the pin and
 * leaves the pending list. Returns the tools approved. Used by the CLI and the admin route;
 * the caller broadcasts `pins-changed` so every replica reads the pins again.
 */
export async function approvePending(store: StateStore, backend: string, tool?: string): Promise<string[]> {
  const pending = parsePins(await store.getFields(ValueKeys.pinsPending(backend)));
  const approved: string[] = [];
  for (const [name, pin] of pending) {
    if (tool !== undefined && name !== tool) continue;
    await store.putField(ValueKeys.pins(backend), name, JSON.stringify(pin));
    await store.deleteField(ValueKeys.pinsPending(backend), name);
    approved.push(name);
  }
  return approved;
}

/** Every pin and pending change of the backends named, from the store. */
export async function readPins(store: StateStore, backends: readonly string[]): Promise<{ pins: PinsFile; pending: Record<string, Record<string, Pin>> }> {
  const pins: PinsFile = { schema: 'switchboard.pins/v1', backends: {} };
  const pending: Record<string, Record<string, Pin>> = {};
  for (const backend of backends) {
    pins.backends[backend] = Object.fromEntries(parsePins(await store.getFields(ValueKeys.pins(backend))));
    pending[backend] = Object.fromEntries(parsePins(await store.getFields(ValueKeys.pinsPending(backend))));
  }
  return { pins, pending };
}
