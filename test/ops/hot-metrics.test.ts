/**
 * The hot-path counter and histogram (src/ops/hot-metrics.ts, issue 29) export what
 * prom-client's own Counter and Histogram export for the same updates: the same text for
 * Prometheus (label order, cumulative buckets, `+Inf`, sum and count) and the same JSON.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { HotCounter, HotHistogram } from '../../src/ops/hot-metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];
/** Values on, between, below and above the bounds, and labels that need escaping. */
const OBSERVATIONS: Array<[string, string, number]> = [
  ['POST', '/mcp/:backend', 0.0004],
  ['POST', '/mcp/:backend', 0.001],
  ['POST', '/mcp/:backend', 0.0011],
  ['GET', '/mcp/:backend', 5],
  ['GET', '/mcp', 10],
  ['POST', '/mcp', 11],
  ['POST', 'a "quoted"\\route\n', 0.5],
];

function pair() {
  const reference = new Registry();
  const hot = new Registry();
  return {
    reference,
    hot,
    counters: [
      new Counter({ name: 'x_requests_total', help: 'requests', labelNames: ['method', 'route', 'status'], registers: [reference] }),
      new HotCounter({ name: 'x_requests_total', help: 'requests', labelNames: ['method', 'route', 'status'], registry: hot }),
    ] as const,
    histograms: [
      new Histogram({ name: 'x_duration_seconds', help: 'duration', labelNames: ['method', 'route'], buckets: BUCKETS, registers: [reference] }),
      new HotHistogram({ name: 'x_duration_seconds', help: 'duration', labelNames: ['method', 'route'], buckets: BUCKETS, registry: hot }),
    ] as const,
  };
}

describe('hot metrics', () => {
  test('the same updates give the same exposition as prom-client', async () => {
    const { reference, hot, counters, histograms } = pair();
    for (const [method, route, seconds] of OBSERVATIONS) {
      const status = seconds > 1 ? 502 : 200;
      counters[0].inc({ method, route, status });
      counters[1].at(method, route, status).value++;
      histograms[0].observe({ method, route }, seconds);
      histograms[1].observe(histograms[1].at(method, route), seconds);
    }
    // The rare paths' form.
    counters[0].inc({ method: 'GET', route: 'unmatched', status: 404 });
    counters[1].inc({ method: 'GET', route: 'unmatched', status: 404 });
    assert.equal(await hot.metrics(), await reference.metrics());
    // The JSON form too, but for prom-client's empty exemplar slots (the gateway serves text only).
    const withoutExemplars = (metrics: unknown) => JSON.parse(JSON.stringify(metrics, (key, value: unknown) => (key === 'exemplar' ? undefined : value))) as unknown;
    assert.deepEqual(withoutExemplars(await hot.getMetricsAsJSON()), withoutExemplars(await reference.getMetricsAsJSON()));
  });

  test('a cell is one label set: found again by the same values, counted once in the exposition', async () => {
    const { hot, counters } = pair();
    const cell = counters[1].at('POST', '/mcp', 200);
    assert.equal(counters[1].at('POST', '/mcp', 200), cell);
    assert.notEqual(counters[1].at('POST', '/mcp', 201), cell);
    cell.value += 3;
    // `inc` finds the cell by name, whatever order the labels are written in.
    counters[1].inc({ status: 200, route: '/mcp', method: 'POST' });
    assert.match(await hot.metrics(), /^x_requests_total\{method="POST",route="\/mcp",status="200"\} 4$/m);
  });

  test('reset empties both, as the registry resets its metrics', async () => {
    const { reference, hot, counters, histograms } = pair();
    counters[0].inc({ method: 'GET', route: '/', status: 200 });
    counters[1].at('GET', '/', 200).value++;
    histograms[0].observe({ method: 'GET', route: '/' }, 1);
    histograms[1].observe(histograms[1].at('GET', '/'), 1);
    reference.resetMetrics();
    hot.resetMetrics();
    assert.equal(await hot.metrics(), await reference.metrics());
  });
});
