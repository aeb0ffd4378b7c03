/**
 * What Grafana does to a panel's query before Prometheus sees it, and to a series' labels
 * before the legend shows them — for scripts/dashboard-screenshot.ts, which evaluates the
 * chart's own dashboard (helm/switchboard/files/grafana-dashboard.json, issue 45 §4) against
 * a real Prometheus without Grafana.
 *
 * - Variables: `$namespace`, `$job`, `$backend` (the dashboard's query variables; "All" is its
 *   `allValue`, `.*`), and `$__rate_interval`, which Grafana defines as
 *   max(`$__interval` + scrape interval, 4 × scrape interval), `$__interval` being the step.
 * - Legends: `{{label}}` in `legendFormat` becomes the series' value of that label (empty
 *   when it has none); no format, or `__auto`, shows the series' labels as
 *   `{a="1", b="2"}`, or the expression when there are none.
 */

/** The dashboard's own variables, as a viewer picked them. */
export type DashboardVariables = Record<string, string>;

/** Grafana's `$__rate_interval` in whole seconds for a query step and a scrape interval. */
export function rateIntervalSeconds(stepSeconds: number, scrapeSeconds: number): number {
  if (!(stepSeconds > 0) || !(scrapeSeconds > 0)) throw new Error(`step and scrape interval must be positive seconds (got ${stepSeconds}, ${scrapeSeconds})`);
  return Math.ceil(Math.max(stepSeconds + scrapeSeconds, 4 * scrapeSeconds));
}

/**
 * The query as Prometheus receives it. Refuses a `$variable` it does not know rather than
 * send PromQL with a `$` left in it (Prometheus would answer with a parse error).
 */
export function substituteVariables(expr: string, variables: DashboardVariables, rateIntervalS: number): string {
  return expr.replace(/\$(\{)?(__rate_interval|__interval|[A-Za-z_][A-Za-z0-9_]*)(\})?/g, (whole, open: string | undefined, name: string, close: string | undefined) => {
    if (Boolean(open) !== Boolean(close)) throw new Error(`unbalanced variable ${whole} in ${expr}`);
    if (name === '__rate_interval') return `${rateIntervalS}s`;
    const value = variables[name];
    if (value === undefined) throw new Error(`the query uses $${name}, which has no value (known: ${Object.keys(variables).join(', ') || 'none'}, __rate_interval)`);
    return value;
  });
}

/** A series' name in the legend, by the target's `legendFormat`. */
export function legendName(format: string | undefined, labels: Record<string, string>, expr: string): string {
  if (format && format !== '__auto') return format.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_, name: string) => labels[name] ?? '').trim();
  const shown = Object.entries(labels).filter(([name]) => name !== '__name__');
  return shown.length ? `{${shown.map(([name, value]) => `${name}="${value}"`).join(', ')}}` : expr;
}
