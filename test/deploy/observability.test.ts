/**
 * The chart's Grafana dashboard and PrometheusRule (issue 45 §4, "Operators see it coming").
 *
 * Without helm: every query of the dashboard and every alert expression parses as PromQL
 * (Prometheus' own grammar, @prometheus-io/lezer-promql), and every metric it names is in
 * the `/metrics` of a real gateway that served a few MCP calls, with every label it matches
 * or groups by (label names from the series, and from the prom-client registry for counters
 * that need rarer traffic; label values among the strings the source emits). Prometheus'
 * target labels and kube-state-metrics' restart counter are the only exceptions, listed in
 * observability-files.ts. Each alert has a severity, a summary, a description and a runbook
 * section in docs/operations.md; both are off by default.
 *
 * With helm (scripts/fetch-helm.sh; CI sets SB_REQUIRE_HELM=1): the ConfigMap and the
 * PrometheusRule render only when enabled, valid by their API schemas, carrying exactly the
 * files' dashboard and alerts with the release's selector.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { anchorsOf } from '../../scripts/check-links.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { schemaProblems } from './k8s-schemas.js';
import {
  Exported, KUBE_STATE_METRICS, RELEASE_SELECTOR, alertExpr, alerts, dashboard, dashboardQueries, metricsUsed, queryProblems, sourceStrings, type Query,
} from './observability-files.js';
import { analyse } from './promql.js';
import { ROOT, helmBinary, readRepoFile } from './support.js';

const run = promisify(execFile);
const CHART = 'helm/switchboard';
type Values = Record<string, any>;
const values = parseYaml(readRepoFile(`${CHART}/values.yaml`)) as Values;
const schema = JSON.parse(readRepoFile(`${CHART}/values.schema.json`)) as Values;
const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });
addFormats.default(ajv);
const validateValues = ajv.compile(schema);
const schemaErrors = (v: unknown) => (validateValues(v) ? '' : ajv.errorsText(validateValues.errors));

const ALERT_NAMES = [
  'SwitchboardBackendErrors', 'SwitchboardStoreUnavailable', 'SwitchboardConfigReloadRefused', 'SwitchboardConfigNeedsRestart',
  'SwitchboardTokenExchangeFailing', 'SwitchboardToolDefinitionChanged', 'SwitchboardAuditRecordsDropped', 'SwitchboardReplicaRestarting',
];
const alertQueries = (): Query[] => alerts.map((a) => ({ where: `alert ${a.alert}`, expr: alertExpr(a) }));

describe('values: grafanaDashboard and prometheusRule', () => {
  test('both are off by default; the sidecar label is grafana_dashboard: "1"', () => {
    assert.equal(values.grafanaDashboard.enabled, false);
    assert.equal(values.prometheusRule.enabled, false);
    assert.deepEqual(values.grafanaDashboard.labels, { grafana_dashboard: '1' });
  });

  test('the schema accepts both on, and refuses an unknown alert in disabled and a rule without expr', () => {
    const on = structuredClone(values);
    on.grafanaDashboard.enabled = true;
    on.prometheusRule.enabled = true;
    on.prometheusRule.disabled = ['SwitchboardReplicaRestarting'];
    on.prometheusRule.rules = [{ alert: 'Mine', expr: 'vector(1)' }, { record: 'job:x:sum', expr: 'sum(up)' }];
    assert.equal(schemaErrors(on), '');
    for (const broken of [{ disabled: ['SwitchboardTypo'] }, { rules: [{ alert: 'NoExpr' }] }, { rules: [{ expr: '1' }] }, { label: 'x' }]) {
      assert.notEqual(schemaErrors({ ...values, prometheusRule: { ...values.prometheusRule, ...broken } }), '', JSON.stringify(broken));
    }
  });

  test('the schema lists exactly the alerts of the file as what may be disabled', () => {
    assert.deepEqual(schema.properties.prometheusRule.properties.disabled.items.enum, alerts.map((a) => a.alert));
  });
});

describe('the alerts file', () => {
  test('has the alerts of issue 45 §4, each with a severity, summary, description and runbook section', () => {
    assert.deepEqual(alerts.map((a) => a.alert), ALERT_NAMES);
    const anchors = anchorsOf(readRepoFile('docs/operations.md'));
    for (const a of alerts) {
      assert.ok(['critical', 'warning', 'info'].includes(a.severity), `${a.alert}: severity ${a.severity}`);
      assert.ok(a.summary?.length > 10 && a.description?.length > 40, `${a.alert}: summary and description`);
      assert.equal(a.runbook, a.alert.toLowerCase(), `${a.alert}: runbook anchor`);
      assert.ok(anchors.has(a.runbook), `${a.alert}: docs/operations.md has no section #${a.runbook}`);
      if (a.for !== undefined) assert.match(a.for, /^[0-9]+[smh]$/);
    }
  });

  test('only the restart alert reads kube-state-metrics; every other one reads the gateway alone', () => {
    for (const a of alerts) {
      const ksm = [...metricsUsed([{ where: a.alert, expr: alertExpr(a) }])].filter((m) => KUBE_STATE_METRICS.has(m));
      assert.deepEqual(ksm.length > 0, a.alert === 'SwitchboardReplicaRestarting', a.alert);
    }
  });
});

describe('the dashboard file', () => {
  test('is a Grafana dashboard with a Prometheus datasource variable, unique panel ids and panels that do not overlap', () => {
    assert.equal(typeof dashboard.uid, 'string');
    assert.ok(dashboard.schemaVersion >= 36);
    assert.ok(dashboard.templating.list.some((v: Values) => v.type === 'datasource' && v.query === 'prometheus'));
    const panels = dashboard.panels as Values[];
    assert.equal(new Set(panels.map((p) => p.id)).size, panels.length);
    const cells = new Set<string>();
    for (const p of panels) {
      const { x, y, w, h } = p.gridPos;
      assert.ok(x + w <= 24, `${p.title} fits the 24 columns`);
      for (let i = x; i < x + w; i++) for (let j = y; j < y + h; j++) {
        assert.ok(!cells.has(`${i},${j}`), `${p.title} overlaps another panel`);
        cells.add(`${i},${j}`);
      }
      if (p.type !== 'row') assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, p.title);
    }
  });

  test('shows calls and errors per backend, latency, sessions and streams, the store, reloads, token exchanges, pinning, policy denials and lost audit records', () => {
    const used = metricsUsed(dashboardQueries());
    for (const metric of [
      'switchboard_mcp_messages_total', 'switchboard_backend_errors_total', 'switchboard_mcp_request_duration_seconds_bucket',
      'switchboard_sessions_active', 'switchboard_sse_streams_open', 'switchboard_websocket_connections_open', 'switchboard_state_errors_total',
      'switchboard_config_reloads_total', 'switchboard_token_exchanges_total', 'switchboard_tool_definition_changes_total', 'switchboard_policy_denials_total',
      'switchboard_audit_records_dropped_total',
    ]) assert.ok(used.has(metric), `no panel shows ${metric}`);
    assert.ok(![...used].some((m) => KUBE_STATE_METRICS.has(m)), 'the dashboard reads the gateway only');
  });
});

describe('against a real gateway', () => {
  let everything: EverythingHandle;
  let oauth: OAuthHandle;
  let gateway: GatewayHandle;
  let exported: Exported;
  const emitted = sourceStrings();

  before(async () => {
    [everything, oauth] = await Promise.all([startEverything(), startOAuthServer()]);
    gateway = await startGateway({
      issuer: oauth.issuer,
      backends: [{ name: 'everything', url: everything.url }, { name: 'down', url: `http://127.0.0.1:${await freePort()}/mcp`, timeout: '2s' }],
    });
    // Enough traffic for the per-message metrics to have series: calls relayed, a backend that is down.
    const token = await oauth.token({ sub: 'observability-user', aud: gateway.audience });
    const headers = { Authorization: `Bearer ${token}` };
    const client = new Client({ name: 'observability-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('everything'), { requestInit: { headers } }));
    await client.callTool({ name: 'echo', arguments: { message: 'seen' } });
    await client.close();
    const down = new Client({ name: 'observability-test', version: '1.0.0' });
    await assert.rejects(down.connect(new StreamableHTTPClientTransport(gateway.endpoint('down'), { requestInit: { headers } })));
    const res = await fetch(`${gateway.url}/metrics`);
    assert.equal(res.status, 200);
    exported = new Exported(await res.text(), gateway.app.metrics.registry);
  });

  after(async () => {
    await gateway?.close();
    await Promise.allSettled([everything?.stop(), oauth?.stop()]);
  });

  test('the inventory is real: /metrics has the per-message series with their labels', () => {
    assert.deepEqual([...exported.labelsOf('switchboard_mcp_messages_total')!].sort(), ['backend', 'method', 'outcome']);
    assert.deepEqual([...exported.labelsOf('switchboard_mcp_request_duration_seconds_bucket')!].sort(), ['backend', 'le', 'method']);
    assert.deepEqual([...exported.labelsOf('switchboard_token_exchanges_total')!].sort(), ['backend', 'outcome'], 'from the registry: no exchange happened');
    assert.deepEqual([...exported.labelsOf('switchboard_store_waits_total')!].sort(), ['outcome'], 'from the registry: no operation waited');
    assert.equal(exported.labelsOf('switchboard_no_such_metric_total'), undefined, 'a metric that does not exist is not found');
  });

  test('every dashboard query parses and names only metrics and labels the gateway exports', () => {
    const queries = dashboardQueries();
    assert.ok(queries.length >= 20);
    assert.deepEqual(queries.flatMap((q) => queryProblems(q, exported, emitted)), []);
  });

  test('every alert expression parses and names only metrics and labels the gateway (or kube-state-metrics) exports', () => {
    const problems = alerts.flatMap((a) => queryProblems({ where: `alert ${a.alert}`, expr: alertExpr(a) }, exported, emitted, a.alert === 'SwitchboardReplicaRestarting'));
    assert.deepEqual(problems, []);
  });

  test('the checks catch what they are for', () => {
    const problems = (expr: string) => queryProblems({ where: 'q', expr }, exported, emitted);
    assert.match(problems('sum(rate(switchboard_mcp_messages_total[5m])')[0]!, /does not parse/);
    assert.match(problems('rate(switchboard_no_such_metric_total[5m])')[0]!, /not in the gateway's \/metrics/);
    assert.match(problems('switchboard_config_reloads_total{backend="x"}')[0]!, /has no label backend/);
    assert.match(problems('sum by (reason) (switchboard_mcp_messages_total)')[0]!, /has no label reason/);
    assert.match(problems('switchboard_mcp_messages_total{outcome="exploded"}')[0]!, /never emits "exploded"/);
    assert.match(problems('kube_pod_container_status_restarts_total')[0]!, /not in the gateway's/, 'kube-state-metrics only where allowed');
    assert.deepEqual(problems('sum by (namespace, backend) (rate(switchboard_mcp_messages_total{job="x", outcome=~"relayed|rejected"}[5m]))'), []);
    assert.deepEqual(analyse('rate(x[$__rate_interval])').errors.length > 0, true, 'Grafana variables must be substituted first');
  });
});

const helm = helmBinary();
if (!helm && process.env.SB_REQUIRE_HELM === '1') throw new Error('SB_REQUIRE_HELM=1 but no helm binary was found (run scripts/fetch-helm.sh)');

async function render(...args: string[]): Promise<Values[]> {
  const { stdout } = await run(helm!, ['template', 'switchboard', join(ROOT, CHART), '--namespace', 'mcp', ...args], { maxBuffer: 10_000_000 });
  return parseAllDocuments(stdout).map((d) => d.toJS() as Values).filter(Boolean);
}

const BOTH = ['--set', 'grafanaDashboard.enabled=true', '--set', 'prometheusRule.enabled=true'];
const dashboardMap = (docs: Values[]) => docs.find((d) => d.kind === 'ConfigMap' && d.data?.['switchboard.json']);
const ruleOf = (docs: Values[]) => docs.find((d) => d.kind === 'PrometheusRule');

describe('rendered by helm', { skip: helm ? false : 'no helm binary (set HELM_BIN); the checks above still ran' }, () => {
  test('helm lint passes with both on', async () => {
    await run(helm!, ['lint', join(ROOT, CHART), ...BOTH]);
  });

  test('neither object renders by default, each renders alone when enabled, all valid by their API schemas', async () => {
    const defaults = await render();
    assert.equal(dashboardMap(defaults), undefined);
    assert.equal(ruleOf(defaults), undefined);
    const dashboardOnly = await render('--set', 'grafanaDashboard.enabled=true');
    assert.ok(dashboardMap(dashboardOnly) && !ruleOf(dashboardOnly));
    const ruleOnly = await render('--set', 'prometheusRule.enabled=true');
    assert.ok(ruleOf(ruleOnly) && !dashboardMap(ruleOnly));
    const both = await render(...BOTH);
    for (const doc of both) assert.equal(schemaProblems(doc), '');
  });

  test('the ConfigMap: the sidecar label, the release namespace, the file\'s dashboard as it is', async () => {
    const map = dashboardMap(await render(...BOTH))!;
    assert.equal(map.metadata.name, 'switchboard-dashboard');
    assert.equal(map.metadata.namespace, 'mcp');
    assert.equal(map.metadata.labels.grafana_dashboard, '1');
    assert.deepEqual(JSON.parse(map.data['switchboard.json']), dashboard);
  });

  test('the sidecar label, the annotations and the namespace are configurable', async () => {
    const map = dashboardMap(await render(...BOTH, '--set', 'grafanaDashboard.labels.grafana_dashboard=null', '--set-string', 'grafanaDashboard.labels.dashboards=switchboard',
      '--set', 'grafanaDashboard.annotations.grafana_folder=Switchboard', '--set', 'grafanaDashboard.namespace=monitoring'))!;
    assert.equal(map.metadata.labels.grafana_dashboard, undefined);
    assert.equal(map.metadata.labels.dashboards, 'switchboard');
    assert.deepEqual(map.metadata.annotations, { grafana_folder: 'Switchboard' });
    assert.equal(map.metadata.namespace, 'monitoring');
  });

  test('the PrometheusRule: every alert of the file with the release\'s selector, severity, summary, description and runbook_url', async () => {
    const rule = ruleOf(await render(...BOTH, '--set', 'prometheusRule.labels.release=kube-prometheus-stack'))!;
    assert.equal(rule.metadata.labels.release, 'kube-prometheus-stack');
    const [group] = rule.spec.groups as Values[];
    assert.equal(group!.rules.length, alerts.length);
    for (const [i, a] of alerts.entries()) {
      const r = group!.rules[i] as Values;
      assert.equal(r.alert, a.alert);
      assert.equal(r.expr, alertExpr(a), `${a.alert}: the file's expression with the release's selector`);
      assert.equal(r.for, a.for);
      assert.deepEqual(r.labels, { severity: a.severity });
      assert.deepEqual(r.annotations, { summary: a.summary, description: a.description, runbook_url: `docs/operations.md#${a.runbook}` });
    }
    assert.ok(group!.rules.every((r: Values) => r.expr.includes(RELEASE_SELECTOR) || r.expr.includes('container="switchboard"')));
  });

  test('selector, runbookUrl, disabled alerts and further rules', async () => {
    const extra = '[{"alert":"MyOwn","expr":"vector(1)","labels":{"severity":"info"}},{"record":"switchboard:calls:rate5m","expr":"sum(rate(switchboard_mcp_messages_total[5m]))"}]';
    const rule = ruleOf(await render(...BOTH, '--set', 'prometheusRule.selector=app="sb"', '--set', 'prometheusRule.runbookUrl=https://docs.example.com/ops',
      '--set', 'prometheusRule.disabled[0]=SwitchboardReplicaRestarting', '--set-json', `prometheusRule.rules=${extra}`))!;
    const rules = rule.spec.groups[0].rules as Values[];
    assert.deepEqual(rules.map((r) => r.alert ?? r.record), [...ALERT_NAMES.filter((n) => n !== 'SwitchboardReplicaRestarting'), 'MyOwn', 'switchboard:calls:rate5m']);
    assert.equal(rules[0]!.expr, alertExpr(alerts[0]!, 'app="sb"'));
    assert.equal(rules[0]!.annotations.runbook_url, 'https://docs.example.com/ops#switchboardbackenderrors');
    assert.equal(schemaProblems(rule), '');
  });
});
