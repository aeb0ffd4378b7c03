/**
 * The pieces of scripts/dashboard-screenshot.ts that turn the chart's dashboard and
 * Prometheus' answers into the picture in docs/operations.md (issue 45 §4): Grafana's
 * substitutions and legends (scripts/dashboard/grafana-query.ts), values in a panel's unit,
 * the chart's axes and lines (panel-svg.ts), and the page's panels (dashboard-page.ts) —
 * with the real dashboard file, so a panel type or variable the script cannot draw fails here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { dashboardPage, panelHtml, type DashboardPanel } from '../../scripts/dashboard/dashboard-page.js';
import { legendName, rateIntervalSeconds, substituteVariables } from '../../scripts/dashboard/grafana-query.js';
import { formatValue, lastValue, niceTicks, timeSeriesSvg, valueRange, type Series } from '../../scripts/dashboard/panel-svg.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const dashboard = JSON.parse(readFileSync(`${ROOT}helm/switchboard/files/grafana-dashboard.json`, 'utf8')) as { panels: Array<DashboardPanel & { targets?: Array<{ expr: string; legendFormat?: string }> }> };
const VARIABLES = { namespace: 'mcp', job: 'switchboard', backend: '.*' };

describe('Grafana substitutions', () => {
  test('$__rate_interval is max(step + scrape, 4 × scrape), in whole seconds; nonsense is refused', () => {
    assert.equal(rateIntervalSeconds(2, 2), 8);
    assert.equal(rateIntervalSeconds(30, 2), 32);
    assert.equal(rateIntervalSeconds(1.5, 1), 4);
    assert.throws(() => rateIntervalSeconds(0, 2), /positive/);
    assert.throws(() => rateIntervalSeconds(2, NaN), /positive/);
  });

  test('every query of the real dashboard leaves no variable for Prometheus', () => {
    const targets = dashboard.panels.flatMap((p) => p.targets ?? []);
    assert.ok(targets.length >= 20);
    for (const { expr } of targets) {
      const sent = substituteVariables(expr, VARIABLES, 8);
      assert.doesNotMatch(sent, /\$/, sent);
      if (expr.includes('$__rate_interval')) assert.match(sent, /\[8s\]/);
      if (expr.includes('$namespace')) assert.match(sent, /namespace="mcp"/);
    }
  });

  test('${name} works as $name; an unknown or unbalanced variable is refused by name', () => {
    assert.equal(substituteVariables('up{job="${job}", pod=~"$backend"}', VARIABLES, 8), 'up{job="switchboard", pod=~".*"}');
    assert.throws(() => substituteVariables('up{instance="$instance"}', VARIABLES, 8), /\$instance, which has no value/);
    assert.throws(() => substituteVariables('up{job="${job"}', VARIABLES, 8), /unbalanced/);
  });

  test('legends: {{label}} from the series, missing labels empty, no format shows the labels or the query', () => {
    assert.equal(legendName('{{backend}} {{reason}}', { backend: 'down', reason: 'connect' }, 'q'), 'down connect');
    assert.equal(legendName('ended {{backend}} {{reason}}', { backend: 'everything' }, 'q'), 'ended everything');
    assert.equal(legendName('__auto', { __name__: 'up', job: 'x', pod: 'p' }, 'q'), '{job="x", pod="p"}');
    assert.equal(legendName(undefined, {}, 'sum(up)'), 'sum(up)');
  });
});

describe('panel drawing', () => {
  test('values in the panel units the dashboard uses', () => {
    assert.equal(formatValue('percentunit', 0.125), '12.5%');
    assert.equal(formatValue('percentunit', 0.0123), '1.23%');
    assert.equal(formatValue('s', 0.0123), '12 ms');
    assert.equal(formatValue('s', 0.0005), '500 µs');
    assert.equal(formatValue('s', 1.5), '1.5 s');
    assert.equal(formatValue('reqps', 1500), '1.5 K req/s');
    assert.equal(formatValue('short', 3), '3');
    assert.equal(formatValue('short', 0.25), '0.25');
    assert.equal(formatValue('reqps', NaN), 'no data');
  });

  test('ticks are 1, 2 or 5 × 10^k, and the y range ends on a tick above the highest point', () => {
    assert.deepEqual(niceTicks(0, 7.3), [0, 2, 4, 6]);
    assert.deepEqual(niceTicks(0, 0.045), [0, 0.02, 0.04]);
    assert.deepEqual(valueRange([{ name: 'a', points: [[0, 7.3], [1, NaN]] }]), { min: 0, max: 8 });
    assert.deepEqual(valueRange([{ name: 'a', points: [[0, 0]] }]), { min: 0, max: 1 }, 'flat zero still has a range');
  });

  test('a series is a line from its first point at the left edge, broken where the values are NaN', () => {
    const box = { width: 472, height: 124, start: 1000, end: 1400 };
    const svg = timeSeriesSvg([{ name: 'a', points: [[1000, 0], [1100, 4], [1200, NaN], [1300, 8], [1400, 8]] }], box, 'reqps');
    const path = /<path d="([^"]+)"/.exec(svg)![1]!;
    // plot: x from 64 to 464 for 1000..1400 s; y from 106 (0) up to 6 (8, the range's top).
    assert.equal(path, 'M64.0 106.0L164.0 56.0M364.0 6.0L464.0 6.0');
    assert.match(svg, />8 req\/s</);
    // 1015..1200 s: minute ticks at 1020 (x 74.8, by the left edge: anchored at its start), 1080 (in the middle), 1200 (the right edge: at its end).
    const edges = timeSeriesSvg([], { ...box, start: 1015, end: 1200 }, 'reqps');
    assert.match(edges, /<text x="74\.8" y="120" text-anchor="start">00:17<\/text>/);
    assert.match(edges, /<text x="204\.5" y="120" text-anchor="middle">00:18<\/text>/);
    assert.match(edges, /<text x="464\.0" y="120" text-anchor="end">00:20<\/text>/);
    assert.match(svg, />0 req\/s</);
  });

  test('a stat panel shows the last value; a panel type the page cannot draw is refused', () => {
    const layout = { width: 1268, rowHeight: 26, start: 0, end: 60, caption: '' };
    const series: Series[] = [{ name: 'replicas', points: [[0, 2], [30, 3], [60, NaN]] }];
    assert.equal(lastValue(series), 3);
    const stat = panelHtml({ id: 1, type: 'stat', title: 'Replicas', gridPos: { x: 0, y: 0, w: 6, h: 8 } }, series, layout);
    assert.match(stat, /<div class="stat"[^>]*>3<\/div>/);
    assert.throws(() => panelHtml({ id: 2, type: 'heatmap', title: 'H', gridPos: { x: 0, y: 0, w: 6, h: 8 } }, series, layout), /heatmap is not drawn/);
  });

  test('the real dashboard lays out: every panel placed by its gridPos, with its title and legend', () => {
    const drawn = dashboard.panels.map((panel) => ({ panel, series: [{ name: `${panel.title} series`, points: [[0, 1], [60, 2]] as Array<[number, number]> }] }));
    const html = dashboardPage('Switchboard', drawn, { width: 1268, rowHeight: 26, start: 0, end: 60, caption: 'made by a test' });
    for (const panel of dashboard.panels) {
      assert.ok(html.includes(`>${panel.title.replace(/&/g, '&amp;')}<`), panel.title);
      if (panel.type === 'timeseries') assert.ok(html.includes(`</i>${panel.title.replace(/&/g, '&amp;')} series</span>`), `${panel.title}: legend`);
    }
    const bottom = Math.max(...dashboard.panels.map((p) => p.gridPos.y + p.gridPos.h));
    assert.match(html, new RegExp(`<main style="height:${bottom * 26}px`));
    assert.match(html, /made by a test/);
  });
});
