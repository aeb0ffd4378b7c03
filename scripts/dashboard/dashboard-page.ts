/**
 * The static page scripts/dashboard-screenshot.ts photographs: the dashboard's panels laid
 * out by their own `gridPos` (24 columns; a grid row is `rowHeight` pixels, as Grafana's 30),
 * row panels as section titles, each time series panel drawn by panel-svg.ts with its legend
 * and each stat panel as its last value, in Grafana's dark theme colours. It says on its face
 * what it is: the dashboard's queries, evaluated by Prometheus, drawn by this script.
 */
import { formatValue, lastValue, legendHtml, timeSeriesSvg, type Series } from './panel-svg.js';

/** The parts of a Grafana panel the page reads. */
export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  fieldConfig?: { defaults?: { unit?: string } };
}

export interface PageLayout {
  width: number;
  rowHeight: number;
  /** The time range shown, unix seconds. */
  start: number;
  end: number;
  /** One line under the title: how the figures were made. */
  caption: string;
}

const GAP = 6;
const escape = (text: string) => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

const STYLE = `
body { margin: 0; background: #111217; color: #ccccdc; font: 12px Inter, "Helvetica Neue", Arial, sans-serif; }
header { padding: 10px ${GAP}px 4px; }
header h1 { font-size: 17px; font-weight: 500; margin: 0 0 3px; }
header p { margin: 0; color: #8e8e9a; font-size: 11px; }
main { position: relative; margin: 0 ${GAP / 2}px; }
.panel { position: absolute; box-sizing: border-box; background: #181b1f; border: 1px solid #24292e; border-radius: 2px; padding: 6px 8px; overflow: hidden; }
.panel h2 { font-size: 12px; font-weight: 500; margin: 0 0 4px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.row { position: absolute; font-size: 14px; font-weight: 500; padding-top: 6px; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 12px; font-size: 11px; margin-top: 2px; }
.legend span { white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 3px; margin: 0 5px 3px 0; vertical-align: middle; }
.legend.empty { color: #6e6e7a; }
.stat { display: flex; align-items: center; justify-content: center; font-size: 40px; font-weight: 500; color: #73bf69; }
`;

/** One panel's box on the page. */
function placed(panel: DashboardPanel, layout: PageLayout): { left: number; top: number; width: number; height: number } {
  const column = (layout.width - GAP) / 24;
  const { x, y, w, h } = panel.gridPos;
  return { left: x * column + GAP / 2, top: y * layout.rowHeight + GAP / 2, width: w * column - GAP, height: h * layout.rowHeight - GAP };
}

/** A panel's HTML: its title and its data drawn as Grafana's panel type would. */
export function panelHtml(panel: DashboardPanel, series: Series[], layout: PageLayout): string {
  const box = placed(panel, layout);
  const at = `left:${box.left.toFixed(1)}px;top:${box.top}px;width:${box.width.toFixed(1)}px`;
  if (panel.type === 'row') return `<div class="row" style="${at}">${escape(panel.title)}</div>`;
  const unit = panel.fieldConfig?.defaults?.unit;
  const title = `<h2>${escape(panel.title)}</h2>`;
  const inner = box.height - 30;
  if (panel.type === 'stat') {
    return `<div class="panel" style="${at};height:${box.height}px">${title}<div class="stat" style="height:${inner}px">${escape(formatValue(unit, lastValue(series)))}</div></div>`;
  }
  if (panel.type !== 'timeseries') throw new Error(`panel "${panel.title}": type ${panel.type} is not drawn by this page (timeseries, stat, row)`);
  const legendLines = Math.min(3, Math.ceil(series.length / Math.max(1, Math.floor(box.width / 170))));
  const chart = timeSeriesSvg(series, { width: Math.floor(box.width - 16), height: Math.max(60, inner - 15 * Math.max(1, legendLines)), start: layout.start, end: layout.end }, unit);
  return `<div class="panel" style="${at};height:${box.height}px">${title}${chart}${legendHtml(series)}</div>`;
}

/** The whole page: a header naming the dashboard and how it was made, then every panel in place. */
export function dashboardPage(title: string, panels: Array<{ panel: DashboardPanel; series: Series[] }>, layout: PageLayout): string {
  const bottom = Math.max(...panels.map(({ panel }) => panel.gridPos.y + panel.gridPos.h));
  const body = panels.map(({ panel, series }) => panelHtml(panel, series, layout)).join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title><style>${STYLE}</style></head><body>
<header><h1>${escape(title)}</h1><p>${escape(layout.caption)}</p></header>
<main style="height:${bottom * layout.rowHeight}px;width:${layout.width}px">
${body}
</main></body></html>`;
}
