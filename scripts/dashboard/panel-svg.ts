/**
 * Draws one dashboard panel's data as Grafana would show it, for
 * scripts/dashboard-screenshot.ts (issue 45 §4: docs/operations.md shows the dashboard): a
 * time series panel as an inline SVG chart (gridlines, y ticks in the panel's unit, time
 * ticks, one line per series in Grafana's classic palette) with its legend, a stat panel as
 * its last value. Pure functions of the data, so test/scripts/dashboard-panels.test.ts checks
 * them without a browser.
 */

/** One series of a query_range answer, named for the legend. */
export interface Series {
  name: string;
  /** [unix seconds, value]; NaN and missing steps are gaps. */
  points: Array<[number, number]>;
}

export interface ChartBox {
  width: number;
  height: number;
  /** The time range shown, unix seconds. */
  start: number;
  end: number;
}

/** Grafana's classic palette, in its order. */
export const PALETTE = ['#73bf69', '#f2cc0c', '#8ab8ff', '#ff780a', '#f2495c', '#5794f2', '#b877d9', '#705da0', '#37872d', '#fade2a', '#447ebc', '#c15c17'];

const trim = (n: number, digits: number) => String(Number(n.toFixed(digits)));

/** A value in a panel's unit (`fieldConfig.defaults.unit`), as short as Grafana writes it. */
export function formatValue(unit: string | undefined, value: number): string {
  if (!Number.isFinite(value)) return 'no data';
  const magnitude = Math.abs(value);
  switch (unit) {
    case 'percentunit':
      return `${trim(value * 100, magnitude < 0.1 ? 2 : 1)}%`;
    case 's':
      if (value === 0) return '0 s';
      if (magnitude < 1e-3) return `${trim(value * 1e6, 0)} µs`;
      if (magnitude < 1) return `${trim(value * 1e3, magnitude < 0.01 ? 1 : 0)} ms`;
      return `${trim(value, 2)} s`;
    case 'reqps':
      return `${shortNumber(value)} req/s`;
    default:
      return shortNumber(value);
  }
}

function shortNumber(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude >= 1e6) return `${trim(value / 1e6, 2)} Mil`;
  if (magnitude >= 1e3) return `${trim(value / 1e3, 2)} K`;
  return trim(value, magnitude > 0 && magnitude < 1 ? 3 : 2);
}

/** Round tick values covering [min, max]: steps of 1, 2 or 5 × 10^k, about `count` of them. */
export function niceTicks(min: number, max: number, count = 4): number[] {
  if (!(max > min)) return [min];
  const rough = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough)!;
  const ticks: number[] = [];
  for (let t = Math.ceil(min / step) * step; t <= max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

/** The y range a chart shows: from 0 (or below, for negative data) to a round value above the highest point. */
export function valueRange(series: Series[]): { min: number; max: number } {
  const values = series.flatMap((s) => s.points.map(([, v]) => v)).filter(Number.isFinite);
  const low = Math.min(0, ...values);
  const high = Math.max(...values, low);
  if (high === low) return { min: low, max: low + 1 };
  const ticks = niceTicks(low, high);
  const step = ticks.length > 1 ? ticks[1]! - ticks[0]! : high - low;
  return { min: low, max: ticks.at(-1)! >= high ? ticks.at(-1)! : ticks.at(-1)! + step };
}

const escape = (text: string) => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/** The path of one series: a line through its points, broken at NaN. */
function seriesPath(points: Array<[number, number]>, x: (t: number) => number, y: (v: number) => number): string {
  let d = '';
  let pen = false;
  for (const [t, v] of points) {
    if (!Number.isFinite(v)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)} ${y(v).toFixed(1)}`;
    pen = true;
  }
  return d;
}

const clock = (t: number) => new Date(t * 1000).toISOString().slice(11, 16);

/** A time series chart (no legend) as an SVG element of `box`'s size. */
export function timeSeriesSvg(series: Series[], box: ChartBox, unit: string | undefined): string {
  const left = 64;
  const bottom = 18;
  const plotW = box.width - left - 8;
  const plotH = box.height - bottom - 6;
  const { min, max } = valueRange(series);
  const x = (t: number) => left + ((t - box.start) / (box.end - box.start)) * plotW;
  const y = (v: number) => 6 + plotH - ((v - min) / (max - min)) * plotH;
  const parts: string[] = [];
  for (const tick of niceTicks(min, max)) {
    parts.push(`<line x1="${left}" x2="${left + plotW}" y1="${y(tick).toFixed(1)}" y2="${y(tick).toFixed(1)}" stroke="#2c3235"/>`);
    parts.push(`<text x="${left - 6}" y="${(y(tick) + 4).toFixed(1)}" text-anchor="end">${escape(formatValue(unit, tick))}</text>`);
  }
  const minutes = Math.max(1, Math.round((box.end - box.start) / 60 / 4));
  for (let t = Math.ceil(box.start / 60 / minutes) * 60 * minutes; t <= box.end; t += 60 * minutes) {
    parts.push(`<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="6" y2="${6 + plotH}" stroke="#2c3235"/>`);
    // A label at either edge is anchored inside the chart, not cut in half.
    const anchor = x(t) > left + plotW - 16 ? 'end' : x(t) < left + 16 ? 'start' : 'middle';
    parts.push(`<text x="${x(t).toFixed(1)}" y="${box.height - 4}" text-anchor="${anchor}">${clock(t)}</text>`);
  }
  series.forEach((s, i) => {
    const d = seriesPath(s.points, x, y);
    if (d) parts.push(`<path d="${d}" fill="none" stroke="${PALETTE[i % PALETTE.length]}" stroke-width="1.5"/>`);
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${box.width}" height="${box.height}" font-size="10" fill="#9fa7b3">${parts.join('')}</svg>`;
}

/** The legend under a time series: each series' colour and name, as Grafana's list legend. */
export function legendHtml(series: Series[]): string {
  if (!series.length) return '<div class="legend empty">No data</div>';
  return `<div class="legend">${series.map((s, i) => `<span><i style="background:${PALETTE[i % PALETTE.length]}"></i>${escape(s.name)}</span>`).join('')}</div>`;
}

/** A stat panel's figure: the last value of its first series that has one (Grafana's default "last not null"). */
export function lastValue(series: Series[]): number {
  for (const s of series) {
    const last = s.points.filter(([, v]) => Number.isFinite(v)).at(-1);
    if (last) return last[1];
  }
  return NaN;
}
