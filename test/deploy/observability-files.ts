/**
 * The chart's dashboard and alert files (helm/switchboard/files/), read as the chart reads
 * them, and what a real gateway exports, for test/deploy/observability.test.ts: every PromQL
 * expression in either file with the substitutions Grafana and the chart make, and the metric
 * families of `/metrics` with their label names.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import { parse as parseYaml } from 'yaml';
import { analyse } from './promql.js';
import { ROOT, readRepoFile } from './support.js';

export const DASHBOARD_FILE = 'helm/switchboard/files/grafana-dashboard.json';
export const ALERTS_FILE = 'helm/switchboard/files/prometheus-alerts.yaml';

export interface AlertEntry {
  alert: string;
  expr: string;
  for?: string;
  severity: string;
  summary: string;
  description: string;
  runbook: string;
}

export const dashboard = JSON.parse(readRepoFile(DASHBOARD_FILE)) as Record<string, any>;
export const alerts = (parseYaml(readRepoFile(ALERTS_FILE)) as { alerts: AlertEntry[] }).alerts;

/** What the chart puts for `$selector` and `$pods` in release "switchboard", namespace "mcp", by default. */
export const RELEASE_SELECTOR = 'job="switchboard", namespace="mcp"';
export const RELEASE_PODS = 'namespace="mcp", pod=~"switchboard-[a-z0-9]+-[a-z0-9]+", container="switchboard"';

export function alertExpr(entry: AlertEntry, selector = RELEASE_SELECTOR): string {
  return entry.expr.replaceAll('$pods', RELEASE_PODS).replaceAll('$selector', selector);
}

/** Grafana's variables as it substitutes them before the query reaches Prometheus ($backend: All). */
const GRAFANA_VARIABLES: Record<string, string> = { __rate_interval: '5m', namespace: 'mcp', job: 'switchboard', backend: '.*' };

export function grafanaExpr(expr: string): string {
  return expr.replace(/\$(__rate_interval|namespace|job|backend)\b/g, (_, name: string) => GRAFANA_VARIABLES[name]!);
}

export interface Query {
  where: string;
  expr: string;
}

/** Every panel query and every variable's `label_values(<selector>, <label>)`, as Prometheus receives them. */
export function dashboardQueries(): Query[] {
  const panels = (dashboard.panels as any[]).flatMap((p) => [p, ...(p.panels ?? [])]);
  const queries: Query[] = panels.flatMap((p) => (p.targets ?? []).map((t: any) => ({ where: `panel "${p.title}" ${t.refId}`, expr: grafanaExpr(t.expr) })));
  for (const variable of dashboard.templating.list as any[]) {
    if (variable.type !== 'query') continue;
    const m = /^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(variable.query.query);
    if (!m) throw new Error(`variable ${variable.name}: not a label_values(<selector>, <label>) query`);
    // The label is what the variable lists: a `by` over the selector needs the same label to exist.
    queries.push({ where: `variable $${variable.name}`, expr: `count by (${m[2]}) (${grafanaExpr(m[1]!)})` });
  }
  return queries;
}

/** Labels Prometheus attaches to every series at scrape (prometheus-operator's target labels), not in `/metrics`. */
export const TARGET_LABELS = new Set(['namespace', 'job', 'pod', 'instance', 'service', 'endpoint', 'container']);

/** Series from kube-state-metrics, not from the gateway: the only ones the files may name besides its own, with their labels. */
export const KUBE_STATE_METRICS = new Map([['kube_pod_container_status_restarts_total', new Set(['namespace', 'pod', 'container', 'uid'])]]);

/** The metric families a gateway exposes in `/metrics` and the label names of each sample name. */
export class Exported {
  readonly types = new Map<string, string>();
  readonly #labels = new Map<string, Set<string>>();

  /** `text`: a `/metrics` body; `registry`: the app's registry, for the label names of families without series yet. */
  constructor(text: string, registry: Registry) {
    for (const line of text.split('\n')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) this.types.set(type[1]!, type[2]!);
      const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? /.exec(line);
      if (sample) for (const m of (sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) this.#add(sample[1]!, m[1]!);
    }
    for (const metric of registry.getMetricsAsArray() as unknown as Array<{ name: string; labelNames?: string[] }>) {
      for (const label of metric.labelNames ?? []) for (const name of this.sampleNames(metric.name)) this.#add(name, label);
    }
  }

  /** The label names of a sample name (a histogram's `_bucket` has `le`), or undefined when `/metrics` has no such series. */
  labelsOf(sample: string): Set<string> | undefined {
    const family = this.familyOf(sample);
    if (!family) return undefined;
    const labels = new Set(this.#labels.get(sample) ?? []);
    if (sample.endsWith('_bucket') && this.types.get(family) === 'histogram') labels.add('le');
    return labels;
  }

  familyOf(sample: string): string | undefined {
    if (this.types.has(sample)) return sample;
    const base = sample.replace(/_(bucket|sum|count)$/, '');
    return ['histogram', 'summary'].includes(this.types.get(base) ?? '') ? base : undefined;
  }

  sampleNames(family: string): string[] {
    return ['histogram', 'summary'].includes(this.types.get(family) ?? '') ? [`${family}_bucket`, `${family}_sum`, `${family}_count`] : [family];
  }

  #add(sample: string, label: string): void {
    if (!this.#labels.has(sample)) this.#labels.set(sample, new Set());
    this.#labels.get(sample)!.add(label);
  }
}

/** Every '…' string literal in src/: the label values the gateway can emit are among them. */
export function sourceStrings(): Set<string> {
  const strings = new Set<string>();
  const files = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  for (const file of files) for (const m of readFileSync(join(ROOT, 'src', file), 'utf8').matchAll(/'([^'\\\n]*)'/g)) strings.add(m[1]!);
  return strings;
}

/**
 * What is wrong with one query against what the gateway exports: it does not parse; it names
 * a metric `/metrics` lacks; it matches or groups by a label the series lack (target labels
 * aside); it compares a label with a value the gateway never emits.
 */
export function queryProblems(query: Query, exported: Exported, emitted: Set<string>, kubeStateMetrics = false): string[] {
  const use = analyse(query.expr);
  const problems = use.errors.map((e) => `${query.where}: does not parse ${e}`);
  const labelsOf = (metric: string) => (kubeStateMetrics ? KUBE_STATE_METRICS.get(metric) : undefined) ?? exported.labelsOf(metric);
  for (const selector of use.selectors) {
    const labels = labelsOf(selector.metric);
    if (!labels) {
      problems.push(`${query.where}: ${selector.metric} is not in the gateway's /metrics`);
      continue;
    }
    for (const { label, op, value } of selector.matchers) {
      if (!labels.has(label) && !TARGET_LABELS.has(label)) problems.push(`${query.where}: ${selector.metric} has no label ${label}`);
      if (TARGET_LABELS.has(label) || KUBE_STATE_METRICS.has(selector.metric) || value === '.*' || !['=', '=~'].includes(op)) continue;
      for (const alternative of value.split('|')) {
        if (!emitted.has(alternative)) problems.push(`${query.where}: ${selector.metric}{${label}${op}"${value}"}: the gateway never emits "${alternative}"`);
      }
    }
  }
  for (const grouping of use.groupings) {
    for (const selector of grouping.selectors) {
      const labels = labelsOf(selector.metric) ?? new Set();
      for (const label of grouping.labels) {
        if (!labels.has(label) && !TARGET_LABELS.has(label)) problems.push(`${query.where}: ${grouping.clause} over ${selector.metric}, which has no label ${label}`);
      }
    }
  }
  return problems;
}

/** The metric names a set of queries uses. */
export function metricsUsed(queries: Query[]): Set<string> {
  return new Set(queries.flatMap((q) => analyse(q.expr).selectors.map((s) => s.metric)));
}
