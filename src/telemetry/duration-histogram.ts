/**
 * A synchronous histogram with explicit bucket boundaries, kept in cells of our own (one per
 * attribute set, attribute-cells.ts) and read by the export through metric-producer.ts —
 * in place of the SDK's `meter.createHistogram(...).record(value, attributes)`, whose every
 * record hashes the whole attribute set (issue 44 part 1; attribute-cells.ts says why).
 *
 * What it exports is what the SDK's histogram exported for the same records
 * (`test/telemetry/duration-histogram.test.ts` compares the two): the OpenTelemetry metrics SDK
 * specification's "Explicit Bucket Histogram Aggregation"
 * (https://opentelemetry.io/docs/specs/otel/metrics/sdk/#explicit-bucket-histogram-aggregation)
 * as `@opentelemetry/sdk-metrics` 2.x implements it (`HistogramAccumulation`): count, sum, min
 * and max, and a count per bucket, bucket `i` holding the values `boundaries[i-1] < v ≤
 * boundaries[i]` (the last one everything above); cumulative, each point starting when its cell
 * was made (the first record of its attribute set) and ending at the collection. As the SDK's
 * instrument does, a negative value is dropped (a histogram takes no negative measurement) and
 * NaN makes its attribute set's cell but counts nothing. The durations of the MCP semantic
 * conventions (`docs/gen-ai/mcp.md` of open-telemetry/semantic-conventions-genai) are in seconds.
 */
import { ValueType, type HrTime } from '@opentelemetry/api';
import { millisToHrTime } from '@opentelemetry/core';
import { AggregationTemporality, DataPointType, InstrumentType, type DataPoint, type Histogram, type HistogramMetricData, type MetricDescriptor } from '@opentelemetry/sdk-metrics';
import { AttributeCells, type AttributeValue, type AttributeValues, type CellOptions } from './attribute-cells.js';

/** One attribute set's aggregation: the SDK's `HistogramAccumulation`, cumulative from `startTime`. */
class HistogramCell {
  readonly startTime: HrTime = millisToHrTime(Date.now());
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  readonly counts: number[];

  constructor(
    readonly attributes: Record<string, AttributeValue>,
    readonly boundaries: readonly number[],
  ) {
    this.counts = new Array<number>(boundaries.length + 1).fill(0);
  }

  record(value: number): void {
    if (Number.isNaN(value)) return;
    this.count += 1;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
    this.counts[bucketOf(this.boundaries, value)]! += 1;
  }

  /** The cumulative point as the SDK's `HistogramAggregator.toMetricData` gives it: a copy, so later records do not change what is being exported. */
  point(endTime: HrTime): DataPoint<Histogram> {
    const has = this.count > 0;
    return {
      attributes: this.attributes,
      startTime: this.startTime,
      endTime,
      value: { min: has ? this.min : undefined, max: has ? this.max : undefined, sum: this.sum, buckets: { boundaries: this.boundaries as number[], counts: this.counts.slice() }, count: this.count },
    };
  }
}

/** The first bucket whose upper bound is ≥ value, or the last (overflow) bucket: the SDK's `binarySearchUB`. */
function bucketOf(boundaries: readonly number[], value: number): number {
  let lo = 0;
  let hi = boundaries.length - 1;
  let found = boundaries.length;
  while (hi >= lo) {
    const mid = lo + ((hi - lo) >> 1);
    if (boundaries[mid]! < value) lo = mid + 1;
    else {
      found = mid;
      hi = mid - 1;
    }
  }
  return found;
}

export interface DurationHistogramOptions extends CellOptions {
  name: string;
  description: string;
  /** Upper bounds of the buckets, ascending (the instrument's `explicitBucketBoundaries` advice). */
  boundaries: readonly number[];
  /** The attribute keys recorded, in the order the exported attributes list them. */
  keys: readonly string[];
  /** Where each key's value is in a record's values (a span's layout: `METRIC_SLOTS`); by default the keys' own order. */
  slots?: readonly number[];
  unit?: string;
}

export class DurationHistogram {
  /** The descriptor the SDK's default view gives such an instrument (`createInstrumentDescriptorWithView`). */
  readonly descriptor: MetricDescriptor & { type: InstrumentType; advice: { explicitBucketBoundaries: number[] } };
  readonly #cells: AttributeCells<HistogramCell>;

  constructor(options: DurationHistogramOptions) {
    const boundaries = [...options.boundaries].sort((a, b) => a - b);
    this.descriptor = { name: options.name, type: InstrumentType.HISTOGRAM, description: options.description, unit: options.unit ?? 's', valueType: ValueType.DOUBLE, advice: { explicitBucketBoundaries: [...options.boundaries] } };
    const slots = options.slots ?? options.keys.map((_, i) => i);
    this.#cells = new AttributeCells(options.keys, slots, (attributes) => new HistogramCell(attributes, boundaries), options);
  }

  /** One measurement; `values` may hold more than the histogram's attributes (a span's layout): only its slots are read. */
  record(value: number, values: AttributeValues): void {
    if (typeof value !== 'number' || value < 0) return;
    this.#cells.at(values).record(value);
  }

  /** The metric with a cumulative point per attribute set, or undefined before the first record (the SDK exports no metric without points). */
  collect(endTime: HrTime): HistogramMetricData | undefined {
    const cells = this.#cells.cells;
    if (cells.length === 0) return undefined;
    return { descriptor: this.descriptor, aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.HISTOGRAM, dataPoints: cells.map((cell) => cell.point(endTime)) };
  }
}
