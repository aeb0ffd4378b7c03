/**
 * The cells of a metric stream, one per attribute set, found by the attribute values themselves
 * (issue 44 part 1: metrics only ≤ 1.03× a plain call).
 *
 * Why not the OpenTelemetry SDK's own lookup: its `AttributeHashMap` turns each measurement's
 * attributes into a string key (`hashAttributes`: the keys sorted, then `JSON.stringify` of
 * the pairs) before it finds the aggregator — 2.6 µs of CPU per record with a call's 9 metric
 * attributes on this machine (`bench/otel-floor.ts`), two records per call. Here the metric's
 * attribute keys are fixed and few (`METRIC_KEYS` of mcp-attributes.ts), so a cell is found by
 * one `Map` level per key, keyed by that key's value (`undefined` for absent): a dozen lookups
 * on values the call already holds, no object made, no string built. As in src/ops/hot-metrics.ts
 * for the Prometheus metrics. The values are read from the span's own layout (span-attributes.ts)
 * at fixed places ({@link AttributeCells.slots}), not by name from objects of many shapes.
 *
 * The same attribute sets as the SDK's: a key absent is `undefined` in its slot, and values are
 * told apart by `Map`'s SameValueZero — `1` and `'1'` differ, as their JSON does in the SDK's hash.
 *
 * Cardinality limit, by the OpenTelemetry metrics SDK specification ("Cardinality limits",
 * https://opentelemetry.io/docs/specs/otel/metrics/sdk/#cardinality-limits, default 2000):
 * at most `limit - 1` attribute sets get a cell of their own; every measurement of a further
 * set goes to one overflow cell whose only attribute is `otel.metric.overflow = true`, so the
 * stream never has more than `limit` points. Once full, no lookup adds a map level either:
 * memory stays bounded whatever the calls carry.
 */

export type AttributeValue = string | number | boolean;
/** A measurement's attribute values, each of the stream's keys at its slot (other places are not read). */
export type AttributeValues = ArrayLike<AttributeValue | undefined>;

/** The SDK's default cardinality limit per metric stream (`MetricCollector.selectCardinalityLimit`). */
export const DEFAULT_CARDINALITY_LIMIT = 2000;

/** The attribute set of the overflow cell (the spec's "overflow attribute set"). */
export const OVERFLOW_ATTRIBUTES: Readonly<Record<string, boolean>> = Object.freeze({ 'otel.metric.overflow': true });

type Level = Map<AttributeValue | undefined, unknown>;

export interface CellOptions {
  /** Points at most, the overflow cell included (default {@link DEFAULT_CARDINALITY_LIMIT}). */
  cardinalityLimit?: number;
  /** Called once, when the first measurement goes to the overflow cell. */
  onOverflow?: () => void;
}

export class AttributeCells<Cell> {
  readonly #root: Level = new Map();
  readonly #cells: Cell[] = [];
  readonly #last: number;
  readonly #own: number;
  #overflow: Cell | undefined;
  /** The last measurement's values on {@link keys} (copied: a caller may reuse its array) and its cell. */
  readonly #lastKey: (AttributeValue | undefined)[] = [];
  #lastCell: Cell | undefined;

  constructor(
    /** The attribute keys of the stream, in the order the exported attributes list them. */
    readonly keys: readonly string[],
    /** Where each key's value is in a measurement's {@link AttributeValues}. */
    readonly slots: readonly number[],
    /** A new cell for an attribute set (only the keys above, absent ones left out). */
    private readonly create: (attributes: Record<string, AttributeValue>) => Cell,
    private readonly options: CellOptions = {},
  ) {
    if (keys.length < 1) throw new Error('a metric stream needs at least one attribute key');
    if (slots.length !== keys.length) throw new Error('a metric stream needs a slot for each attribute key');
    this.#last = keys.length - 1;
    this.#own = Math.max(0, (options.cardinalityLimit ?? DEFAULT_CARDINALITY_LIMIT) - 1);
  }

  /** The cell of the set the given values hold at {@link slots} (other places are not read), made on first use. */
  at(values: AttributeValues): Cell {
    const slots = this.slots;
    // Most records repeat the set of the one before (the same tool of the same backend): found by comparing its values, no map walked.
    const last = this.#lastKey;
    if (this.#lastCell !== undefined && sameAt(slots, last, values)) return this.#lastCell;
    const cell = this.#find(values);
    for (let i = 0; i < slots.length; i++) last[i] = values[slots[i]!];
    this.#lastCell = cell;
    return cell;
  }

  #find(values: AttributeValues): Cell {
    const slots = this.slots;
    let level = this.#root;
    for (let i = 0; i < this.#last; i++) {
      const value = values[slots[i]!];
      let next = level.get(value) as Level | undefined;
      if (next === undefined) {
        if (this.#cells.length >= this.#own) return this.#overflowCell();
        level.set(value, (next = new Map()));
      }
      level = next;
    }
    const value = values[slots[this.#last]!];
    const cell = level.get(value) as Cell | undefined;
    return cell ?? this.#add(level, value, values);
  }

  #add(level: Level, value: AttributeValue | undefined, values: AttributeValues): Cell {
    if (this.#cells.length >= this.#own) return this.#overflowCell();
    const own: Record<string, AttributeValue> = {};
    for (let i = 0; i < this.keys.length; i++) if (values[this.slots[i]!] !== undefined) own[this.keys[i]!] = values[this.slots[i]!]!;
    const cell = this.create(own);
    level.set(value, cell);
    this.#cells.push(cell);
    return cell;
  }

  #overflowCell(): Cell {
    if (this.#overflow === undefined) {
      this.#overflow = this.create({ ...OVERFLOW_ATTRIBUTES });
      this.#cells.push(this.#overflow);
      this.options.onOverflow?.();
    }
    return this.#overflow;
  }

  /** Every cell, in the order it was made (the overflow cell among them once made). */
  get cells(): readonly Cell[] {
    return this.#cells;
  }
}

/** Whether `values` holds `key`'s values at `slots` (SameValueZero, as the cells' maps tell values apart). */
function sameAt(slots: readonly number[], key: readonly (AttributeValue | undefined)[], values: AttributeValues): boolean {
  for (let i = 0; i < slots.length; i++) {
    const x = key[i];
    const y = values[slots[i]!];
    if (x !== y && !(x !== x && y !== y)) return false;
  }
  return true;
}
