/**
 * The counter and histogram of the metrics updated on every proxied message (HTTP requests and
 * their duration per route, MCP messages and their duration per backend and method), in plain
 * fields per label set, exported through the app's prom-client registry like any other metric.
 *
 * Why not prom-client's own `Counter` and `Histogram`: each `inc` and `observe` checks every
 * label name, builds a hash string of the label values and looks it up, and its timer adds
 * arrays and a merged copy of the labels; four of them per call cost about 3 % of a proxied
 * call's CPU (issue 29, `bench/README.md`). Here the label set's cell is found through one small
 * map per label, keyed by the values themselves (interned method and route strings, status
 * numbers), and updating it is a few additions. The exposition is prom-client's: the registry
 * formats what {@link HotCounter.get} and {@link HotHistogram.getForPromString} return, as it
 * formats its own metrics (`test/ops/hot-metrics.test.ts` compares the text).
 */
import type { Metric, Registry } from 'prom-client';

export type LabelValue = string | number;
type Labels = Record<string, LabelValue>;

/** The most labels a hot metric has: {@link LabelTree.at} takes them as arguments, not as an array to allocate. */
const MAX_LABELS = 3;

/** Label sets by their values, one map level per label name, in the metric's label order. */
class LabelTree<Cell> {
  readonly #root = new Map<LabelValue | undefined, unknown>();
  readonly #cells: Cell[] = [];

  constructor(
    readonly labelNames: readonly string[],
    private readonly create: (labels: Labels) => Cell,
  ) {
    if (labelNames.length < 1 || labelNames.length > MAX_LABELS) throw new Error(`a hot metric has 1 to ${MAX_LABELS} labels`);
  }

  /** The cell of these values (one per label name, in order), made on first use. */
  at(a: LabelValue, b?: LabelValue, c?: LabelValue): Cell {
    let level = this.#root;
    const depth = this.labelNames.length;
    if (depth > 1) level = this.#below(level, a);
    if (depth > 2) level = this.#below(level, b);
    const last = depth === 1 ? a : depth === 2 ? b : c;
    let cell = level.get(last) as Cell | undefined;
    if (!cell) {
      const values = [a, b, c];
      const labels: Labels = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
      level.set(last, (cell = this.create(labels)));
      this.#cells.push(cell);
    }
    return cell;
  }

  #below(level: Map<LabelValue | undefined, unknown>, value: LabelValue | undefined): Map<LabelValue | undefined, unknown> {
    let next = level.get(value) as Map<LabelValue | undefined, unknown> | undefined;
    if (!next) level.set(value, (next = new Map()));
    return next;
  }

  get cells(): readonly Cell[] {
    return this.#cells;
  }

  clear(): void {
    this.#root.clear();
    this.#cells.length = 0;
  }
}

interface MetricOptions {
  name: string;
  help: string;
  labelNames: readonly string[];
  registry: Registry;
}

/**
 * What both kinds share: a name and help, registered in the registry on creation, and the
 * label sets as cells found by their values ({@link at}), emptied by the registry's reset.
 */
abstract class HotMetric<Cell> {
  readonly name: string;
  readonly help: string;
  readonly aggregator = 'sum';
  protected readonly cells: LabelTree<Cell>;

  constructor(options: MetricOptions, create: (labels: Labels) => Cell) {
    this.name = options.name;
    this.help = options.help;
    this.cells = new LabelTree(options.labelNames, create);
    options.registry.registerMetric(this as unknown as Metric);
  }

  /** The cell of these label values, in the order of the label names. */
  at(a: LabelValue, b?: LabelValue, c?: LabelValue): Cell {
    return this.cells.at(a, b, c);
  }

  reset(): void {
    this.cells.clear();
  }
}

/** One label set's count; keep it and add to `value`. */
export interface CounterCell {
  readonly labels: Labels;
  value: number;
}

/** A Prometheus counter whose label sets are cells the caller finds once per call ({@link at}). */
export class HotCounter extends HotMetric<CounterCell> {
  readonly type = 'counter';

  constructor(options: MetricOptions) {
    super(options, (labels) => ({ labels, value: 0 }));
  }

  /** Adds one (or `by`) to the label set named by `labels`, as prom-client's `inc` does; for the rare paths. */
  inc(labels: Labels, by = 1): void {
    const [a, b, c] = this.cells.labelNames.map((name) => labels[name]!);
    this.cells.at(a!, b, c).value += by;
  }

  async get() {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.cells.cells.map((c) => ({ labels: c.labels, value: c.value })) };
  }
}

/** One label set's observations, by bucket (not cumulative). */
export interface HistogramCell {
  readonly labels: Labels;
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** A Prometheus histogram whose label sets are cells the caller finds once per call ({@link at}). */
export class HotHistogram extends HotMetric<HistogramCell> {
  readonly type = 'histogram';
  readonly #bounds: readonly number[];

  constructor(options: MetricOptions & { buckets: readonly number[] }) {
    const bounds = [...options.buckets].sort((a, b) => a - b);
    super(options, (labels) => ({ labels, counts: new Float64Array(bounds.length), sum: 0, count: 0 }));
    this.#bounds = bounds;
  }

  /** Counts `value` in `cell`: in the first bucket whose bound it does not exceed, else only in `+Inf`. */
  observe(cell: HistogramCell, value: number): void {
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        cell.counts[i]!++;
        break;
      }
    }
    cell.sum += value;
    cell.count++;
  }

  /** The samples in the shape prom-client's registry formats for the text exposition: cumulative buckets, then sum and count. */
  async getForPromString() {
    const name = this.name;
    const values: Array<{ labels: Labels; sharedLabels: Labels; value: number; metricName: string }> = [];
    for (const cell of this.cells.cells) {
      let cumulative = 0;
      this.#bounds.forEach((le, i) => {
        cumulative += cell.counts[i]!;
        values.push({ labels: { le }, sharedLabels: cell.labels, value: cumulative, metricName: `${name}_bucket` });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: cell.labels, value: cell.count, metricName: `${name}_bucket` });
      values.push({ labels: {}, sharedLabels: cell.labels, value: cell.sum, metricName: `${name}_sum` });
      values.push({ labels: {}, sharedLabels: cell.labels, value: cell.count, metricName: `${name}_count` });
    }
    return { name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** The same samples with each one's labels in one object (prom-client's JSON form). */
  async get() {
    const data = await this.getForPromString();
    return { ...data, values: data.values.map(({ labels, sharedLabels, value, metricName }) => ({ labels: { ...labels, ...sharedLabels }, value, metricName })) };
  }
}
