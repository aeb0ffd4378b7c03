/**
 * Runs of fields kept as one piece of bytes (issue 44 part 1). A record's fields come in groups
 * that repeat together. A gateway span's attributes: the method, tool and operation of a call;
 * the session, its protocol version and the client's address; the backend, the transport and the
 * user's pseudonym (telemetry/otlp-json-values.ts). An audit line's members: the user, session,
 * endpoint, backend and method; the decision, rule and outcome (audit-line.ts). Written one
 * field at a time, each is a comparison, a kept encoding (kept-encodings.ts) and a copy — about
 * 140 instructions of `TypedArray.prototype.set` alone (bench/README.md, "Counting one
 * function"). Kept by run, a group is compared value by value and copied once.
 *
 * The fields are slots of an array of values (a span's layout, telemetry/span-attributes.ts; the
 * audit line's own); a run is the slots `[start, end)`, its fields joined by commas.
 *
 * A run's kept bytes are written from its values and reused only when every value of the run is
 * the same (`===`) as when they were written: a string, a number or a boolean; a run holding
 * anything else is written afresh each time (an array could change in place). Bounded: at most
 * {@link ENTRIES_KEPT} sets of values a run, none longer than {@link BYTES_KEPT} once encoded;
 * the oldest set gives way to a new one. Several sessions and users interleave, so a run keeps
 * more than the last set.
 */
import type { Utf8BatchWriter } from './utf8-batch-writer.js';

/** Sets of values kept per run: the calls in flight of a few sessions, SERVER and CLIENT spans each. */
const ENTRIES_KEPT = 8;
/** The longest run kept, encoded. */
const BYTES_KEPT = 2048;

/** Writes one slot's field (no comma before it). */
export type WriteSlot = (slot: number, value: unknown, w: Utf8BatchWriter) => void;

interface Entry {
  /** The run's values, slot by slot, when {@link bytes} were written. */
  readonly values: unknown[];
  /** Their fields joined by commas; empty when the run had no value. */
  readonly bytes: Buffer;
}

export class KeptRun {
  readonly #entries: Entry[] = [];
  /** The entry found or made last: tried first. */
  #last = 0;
  /** The entry a new set of values replaces once all are taken. */
  #oldest = 0;

  /** The slots `[start, end)` of the layout, and how one of them is written. */
  constructor(
    readonly start: number,
    readonly end: number,
    private readonly writeSlot: WriteSlot,
  ) {}

  /**
   * Appends the run's fields to `w`, a comma before them unless `first`; returns whether the
   * list is still empty (`first` when the run had no value). A slot holding `undefined` is left out.
   */
  write(values: readonly unknown[], first: boolean, w: Utf8BatchWriter): boolean {
    const entry = this.#find(values);
    if (entry === undefined) return this.#writeAfresh(values, first, w);
    if (entry.bytes.length === 0) return first;
    if (!first) w.byte(0x2c /* , */);
    w.bytes(entry.bytes);
    return false;
  }

  #find(values: readonly unknown[]): Entry | undefined {
    const entries = this.#entries;
    const count = entries.length;
    if (count === 0) return undefined;
    if (this.#matches(entries[this.#last]!.values, values)) return entries[this.#last];
    for (let e = 0; e < count; e++) {
      if (e !== this.#last && this.#matches(entries[e]!.values, values)) {
        this.#last = e;
        return entries[e];
      }
    }
    return undefined;
  }

  #matches(kept: readonly unknown[], values: readonly unknown[]): boolean {
    const start = this.start;
    const n = this.end - start;
    for (let k = 0; k < n; k++) if (values[start + k] !== kept[k]) return false;
    return true;
  }

  /** The run written value by value, and kept when it may be. */
  #writeAfresh(values: readonly unknown[], first: boolean, w: Utf8BatchWriter): boolean {
    let keepable = true;
    let from = -1;
    for (let slot = this.start; slot < this.end; slot++) {
      const value = values[slot];
      if (value === undefined) continue;
      if (!first) w.byte(0x2c /* , */);
      first = false;
      if (from < 0) from = w.length;
      const type = typeof value;
      if (type !== 'string' && type !== 'number' && type !== 'boolean') keepable = false;
      this.writeSlot(slot, value, w);
    }
    const bytes = from < 0 ? Buffer.alloc(0) : w.buffer.subarray(from, w.length);
    if (keepable && bytes.length <= BYTES_KEPT) this.#keep(values.slice(this.start, this.end), Buffer.from(bytes));
    return first;
  }

  #keep(values: unknown[], bytes: Buffer): void {
    const entry: Entry = { values, bytes };
    if (this.#entries.length < ENTRIES_KEPT) {
      this.#last = this.#entries.push(entry) - 1;
      return;
    }
    this.#entries[this.#oldest] = entry;
    this.#last = this.#oldest;
    this.#oldest = (this.#oldest + 1) % ENTRIES_KEPT;
  }
}
