/**
 * The chart's alerts (helm/switchboard/files/prometheus-alerts.yaml) evaluated by Prometheus'
 * own rule engine: `promtool check rules` accepts them with their annotations, and `promtool
 * test rules` runs each over made-up series, minute by minute, and checks that it fires on
 * what it is for, after its `for`, with the labels an operator routes on, and stays quiet on
 * what it is not for (another release, an error blip, invalid_grant, the Redis container).
 * The expressions are those the chart renders for release "switchboard" in namespace "mcp"
 * (observability.test.ts checks they are the same).
 *
 * The dashboard's queries go through `promtool check rules` as well, as recording rules: the
 * parser of Prometheus itself besides the lezer grammar of observability.test.ts.
 *
 * promtool comes from Debian's prometheus package: `bash scripts/fetch-promtool.sh` (or
 * PROMTOOL_BIN, or `promtool` on PATH); without it these tests are skipped, unless
 * SB_REQUIRE_PROMTOOL=1.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { alertExpr, alerts, dashboardQueries } from './observability-files.js';
import { ROOT } from './support.js';

const run = promisify(execFile);

function promtoolBinary(): string | undefined {
  for (const candidate of [process.env.PROMTOOL_BIN, join(ROOT, '.cache/promtool/promtool'), 'promtool'].filter((c): c is string => Boolean(c))) {
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not there
    }
  }
  return undefined;
}

const promtool = promtoolBinary();
if (!promtool && process.env.SB_REQUIRE_PROMTOOL === '1') throw new Error('SB_REQUIRE_PROMTOOL=1 but no promtool was found (run scripts/fetch-promtool.sh)');

/** The series labels Prometheus gives a gateway pod of release "switchboard" scraped by the chart's ServiceMonitor. */
const POD = 'switchboard-5d9c7b7f4-abcde';
const OTHER_POD = 'switchboard-5d9c7b7f4-fghij';
const gateway = (labels: string) => `job="switchboard", namespace="mcp", pod="${POD}", ${labels}`;
const series = (metric: string, labels: string, values: string) => ({ series: `${metric}{${labels}}`, values });
/** `n` NaN samples (promtool's expanding notation has no NaN repeat). */
const nans = (n: number) => Array(n).fill('NaN').join(' ');

interface Expectation {
  at: string;
  /** The alerts firing then, by their labels (severity included); [] = none. */
  firing: Array<Record<string, string>>;
}

interface Scenario {
  what: string;
  input: Array<{ series: string; values: string }>;
  expect: Expectation[];
}

const refused = (pod: string, outcome: string) => ({ namespace: 'mcp', job: 'switchboard', pod, outcome });
const severity = (name: string) => alerts.find((a) => a.alert === name)!.severity;

const SCENARIOS: Record<string, Scenario[]> = {
  SwitchboardBackendErrors: [{
    what: 'one backend fails 1 in 6 messages for 20 minutes; another has none; a third fails rarely with little traffic; another release fails',
    input: [
      series('switchboard_mcp_messages_total', gateway('backend="hr", method="tools/call", outcome="relayed"'), '0+50x40'),
      series('switchboard_mcp_messages_total', gateway('backend="hr", method="tools/call", outcome="backend_error"'), '0+10x40'),
      series('switchboard_mcp_messages_total', gateway('backend="docs", method="tools/call", outcome="relayed"'), '0+50x40'),
      series('switchboard_mcp_messages_total', gateway('backend="rare", method="tools/call", outcome="backend_error"'), '0+0.3x40'),
      series('switchboard_mcp_messages_total', 'job="other", namespace="mcp", pod="other-1", backend="hr", method="tools/call", outcome="backend_error"', '0+10x40'),
    ],
    expect: [{ at: '5m', firing: [] }, { at: '20m', firing: [{ namespace: 'mcp', job: 'switchboard', backend: 'hr' }] }],
  }],
  SwitchboardStoreUnavailable: [
    {
      what: 'an idle replica cannot count its sessions (the gauge is NaN) from minute 5',
      input: [series('switchboard_sessions_active', gateway(''), `3x4 ${nans(20)}`)],
      expect: [{ at: '8m', firing: [] }, { at: '12m', firing: [{ namespace: 'mcp', job: 'switchboard' }] }],
    },
    {
      what: 'store operations fail and requests get 503 for 20 minutes',
      input: [
        series('switchboard_state_errors_total', gateway('operation="get"'), '0+5x20'),
        series('switchboard_mcp_messages_total', gateway('backend="hr", method="tools/call", outcome="state_unavailable"'), '0+5x20'),
      ],
      expect: [{ at: '3m', firing: [] }, { at: '10m', firing: [{ namespace: 'mcp', job: 'switchboard' }] }],
    },
    {
      what: 'a failover: errors during one minute, then none',
      input: [series('switchboard_state_errors_total', gateway('operation="get"'), '0 0 0 4 4x20')],
      expect: [{ at: '10m', firing: [] }],
    },
  ],
  SwitchboardConfigReloadRefused: [{
    what: 'one pod\'s first refused reload at minute 5 (its series appears with it); another pod\'s at minutes 0 and 25; applied reloads',
    input: [
      series('switchboard_config_reloads_total', gateway('outcome="invalid"'), '_x5 1x40'),
      series('switchboard_config_reloads_total', `job="switchboard", namespace="mcp", pod="${OTHER_POD}", outcome="failed"`, '1x25 2x20'),
      series('switchboard_config_reloads_total', gateway('outcome="applied"'), '1+1x40'),
    ],
    expect: [
      { at: '4m', firing: [refused(OTHER_POD, 'failed')] },
      { at: '6m', firing: [refused(OTHER_POD, 'failed'), refused(POD, 'invalid')] },
      { at: '12m', firing: [refused(POD, 'invalid')] },
      { at: '20m', firing: [] },
      { at: '26m', firing: [refused(OTHER_POD, 'failed')] },
      { at: '40m', firing: [] },
    ],
  }],
  SwitchboardConfigNeedsRestart: [{
    what: 'a restart-only change at minute 5 on a pod that is still there 10 minutes later',
    input: [series('switchboard_config_reloads_total', gateway('outcome="needs_restart"'), '_x5 1x60')],
    expect: [{ at: '10m', firing: [] }, { at: '16m', firing: [{ namespace: 'mcp', job: 'switchboard', pod: POD }] }, { at: '50m', firing: [] }],
  }],
  SwitchboardTokenExchangeFailing: [{
    what: 'the authorization server refuses a quarter of one backend\'s exchanges; another backend\'s users must sign in again (invalid_grant)',
    input: [
      series('switchboard_token_exchanges_total', gateway('backend="hr", outcome="ok"'), '0+30x40'),
      series('switchboard_token_exchanges_total', gateway('backend="hr", outcome="refused"'), '0+10x40'),
      series('switchboard_token_exchanges_total', gateway('backend="cal", outcome="ok"'), '0+30x40'),
      series('switchboard_token_exchanges_total', gateway('backend="cal", outcome="invalid_grant"'), '0+30x40'),
    ],
    expect: [{ at: '5m', firing: [] }, { at: '20m', firing: [{ namespace: 'mcp', job: 'switchboard', backend: 'hr' }] }],
  }],
  SwitchboardToolDefinitionChanged: [{
    what: 'a backend changes a pinned tool at minute 3 (its first change: the series appears with it)',
    input: [series('switchboard_tool_definition_changes_total', gateway('backend="github", mode="block"'), '_x3 1x40')],
    expect: [{ at: '2m', firing: [] }, { at: '4m', firing: [{ namespace: 'mcp', job: 'switchboard', backend: 'github', mode: 'block' }] }, { at: '30m', firing: [] }],
  }],
  SwitchboardAuditRecordsDropped: [{
    what: 'the audit file of one pod fails at minute 3 (the series appears with it) and again at minute 20; another pod loses one record at its shutdown at minute 30',
    input: [
      series('switchboard_audit_records_dropped_total', gateway('sink="file", reason="write_failed"'), '_x3 12x17 40x30'),
      series('switchboard_audit_records_dropped_total', `job="switchboard", namespace="mcp", pod="${OTHER_POD}", sink="file", reason="closed"`, '_x30 1x20'),
    ],
    expect: [
      { at: '2m', firing: [] },
      { at: '4m', firing: [{ namespace: 'mcp', job: 'switchboard', pod: POD, sink: 'file', reason: 'write_failed' }] },
      { at: '16m', firing: [] },
      { at: '21m', firing: [{ namespace: 'mcp', job: 'switchboard', pod: POD, sink: 'file', reason: 'write_failed' }] },
      { at: '31m', firing: [{ namespace: 'mcp', job: 'switchboard', pod: OTHER_POD, sink: 'file', reason: 'closed' }] },
      { at: '45m', firing: [] },
    ],
  }],
  SwitchboardReplicaRestarting: [{
    what: 'a gateway container restarts twice; the bundled Redis and another release restart more (kube-state-metrics)',
    input: [
      series('kube_pod_container_status_restarts_total', `job="kube-state-metrics", namespace="mcp", pod="${POD}", container="switchboard"`, '0 0 1 1 2x20'),
      series('kube_pod_container_status_restarts_total', 'job="kube-state-metrics", namespace="mcp", pod="switchboard-redis-0", container="redis"', '0+1x20'),
      series('kube_pod_container_status_restarts_total', 'job="kube-state-metrics", namespace="mcp", pod="other-5d9c7b7f4-abcde", container="switchboard"', '0+1x20'),
    ],
    expect: [{ at: '2m', firing: [] }, { at: '5m', firing: [{ job: 'kube-state-metrics', namespace: 'mcp', pod: POD, container: 'switchboard' }] }],
  }],
};

const dir = mkdtempSync(join(tmpdir(), 'sb-alerts-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The rules file Prometheus would load from the chart's PrometheusRule; annotations only when asked (promtool compares them). */
function writeRules(withAnnotations: boolean): string {
  const rules = alerts.map((a) => ({
    alert: a.alert,
    expr: alertExpr(a),
    ...(a.for ? { for: a.for } : {}),
    labels: { severity: a.severity },
    ...(withAnnotations ? { annotations: { summary: a.summary, description: a.description, runbook_url: `docs/operations.md#${a.runbook}` } } : {}),
  }));
  const file = join(dir, withAnnotations ? 'annotated.yaml' : 'rules.yaml');
  writeFileSync(file, stringify({ groups: [{ name: 'switchboard', rules }] }));
  return file;
}

async function promtoolTest(alert: string, scenario: Scenario): Promise<void> {
  const rules = writeRules(false);
  const unit = {
    rule_files: [rules],
    evaluation_interval: '1m',
    tests: [{
      interval: '1m',
      input_series: scenario.input,
      alert_rule_test: scenario.expect.map((e) => ({ eval_time: e.at, alertname: alert, exp_alerts: e.firing.map((labels) => ({ exp_labels: { ...labels, severity: severity(alert) } })) })),
    }],
  };
  const file = join(dir, `${alert}.test.yaml`);
  writeFileSync(file, stringify(unit));
  try {
    await run(promtool!, ['test', 'rules', file]);
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    assert.fail(`${alert}, ${scenario.what}:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

describe('the alerts evaluated by promtool', { skip: promtool ? false : 'no promtool (bash scripts/fetch-promtool.sh, or PROMTOOL_BIN)' }, () => {
  test('promtool check rules accepts every alert with its annotations (Prometheus templates included)', async () => {
    const { stdout } = await run(promtool!, ['check', 'rules', writeRules(true)]);
    assert.match(stdout, new RegExp(`SUCCESS: ${alerts.length} rules found`));
  });

  test('every dashboard query parses with Prometheus\' own parser too (checked as recording rules)', async () => {
    const queries = dashboardQueries();
    const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr }));
    const file = join(dir, 'dashboard.yaml');
    writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
    const { stdout } = await run(promtool!, ['check', 'rules', file]);
    assert.match(stdout, new RegExp(`SUCCESS: ${queries.length} rules found`));
  });

  test('every alert of the file has scenarios here', () => {
    assert.deepEqual(Object.keys(SCENARIOS), alerts.map((a) => a.alert));
  });

  for (const [alert, scenarios] of Object.entries(SCENARIOS)) {
    for (const scenario of scenarios) test(`${alert}: ${scenario.what}`, () => promtoolTest(alert, scenario));
  }
});
