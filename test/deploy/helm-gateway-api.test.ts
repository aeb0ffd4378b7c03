/**
 * The chart's Gateway API route and NetworkPolicy, and the production values example
 * (issue 32 §3). With the real helm (scripts/fetch-helm.sh; CI sets SB_REQUIRE_HELM=1):
 * every combination of the chart's switches renders, every rendered object is valid by its
 * API's schema (Kubernetes, Gateway API, prometheus-operator: test/deploy/k8s-schemas.ts),
 * and the config it carries is one the gateway accepts. Statically (no helm needed): the
 * defaults keep both off and the values schema refuses what would render a broken object.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { schemaProblems } from './k8s-schemas.js';
import { ROOT, coalesceValues, helmBinary, readRepoFile } from './support.js';

const run = promisify(execFile);
const CHART = 'helm/switchboard';
const PRODUCTION = `${CHART}/ci/production-values.yaml`;
type Values = Record<string, any>;

const values = parseYaml(readRepoFile(`${CHART}/values.yaml`)) as Values;
const production = coalesceValues(values, parseYaml(readRepoFile(PRODUCTION))) as Values;
const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });
addFormats.default(ajv);
const validateValues = ajv.compile(JSON.parse(readRepoFile(`${CHART}/values.schema.json`)) as object);
const schemaErrors = (v: unknown) => (validateValues(v) ? '' : ajv.errorsText(validateValues.errors));

/** Gateway API Duration → seconds (1h30m, 90s, 500ms). */
function seconds(duration: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  return [...duration.matchAll(/(\d+)(ms|h|m|s)/g)].reduce((sum, [, n, unit]) => sum + Number(n) * units[unit!]!, 0);
}

describe('values: httpRoute and networkPolicy', () => {
  test('both are off by default, and the Ingress stays an option', () => {
    assert.equal(values.httpRoute.enabled, false);
    assert.equal(values.networkPolicy.enabled, false);
    assert.ok('ingress' in values);
  });

  test('the default route timeouts outlast SSE streams and parked calls by far (at least an hour), backendRequest within request', () => {
    const { request, backendRequest } = values.httpRoute.timeouts as { request: string; backendRequest: string };
    assert.ok(seconds(request) >= 3600, request);
    assert.ok(seconds(backendRequest) <= seconds(request));
    // Longer than any backend call the shipped configs allow (backends[].timeout).
    assert.ok(seconds(backendRequest) > 120);
  });

  test('the values schema refuses what would render a broken object', () => {
    const broken: Array<[string, (v: Values) => void]> = [
      ['an HTTPRoute without parentRefs', (v) => (v.httpRoute.enabled = true)],
      ['a timeout that is not a Gateway API Duration', (v) => (v.httpRoute.timeouts.request = '1 hour')],
      ['an unknown key in networkPolicy', (v) => (v.networkPolicy.ingres = {})],
      ['an egress rule with a misspelled key', (v) => (v.networkPolicy.egress.backends = [{ too: [] }])],
    ];
    for (const [what, mutate] of broken) {
      const candidate = structuredClone(values);
      mutate(candidate);
      assert.notEqual(schemaErrors(candidate), '', `schema accepted ${what}`);
    }
  });

  test('the production values validate', () => {
    assert.equal(schemaErrors(production), '');
  });
});

const helm = helmBinary();
if (!helm && process.env.SB_REQUIRE_HELM === '1') throw new Error('SB_REQUIRE_HELM=1 but no helm binary was found (run scripts/fetch-helm.sh)');

async function render(...args: string[]): Promise<Values[]> {
  const { stdout } = await run(helm!, ['template', 'switchboard', join(ROOT, CHART), '--namespace', 'mcp', ...args], { maxBuffer: 10_000_000 });
  return parseAllDocuments(stdout).map((d) => d.toJS() as Values).filter(Boolean);
}

/** Every manifest valid by its API's schema; the config the gateway would read, valid with `env`. */
function checkRender(docs: Values[], env: Record<string, string>, label: string): void {
  for (const doc of docs) assert.equal(schemaProblems(doc), '', label);
  const configMap = docs.find((d) => d.kind === 'ConfigMap')!;
  assert.doesNotThrow(() => parseConfig(parseYaml(configMap.data['switchboard.yaml']), env), label);
}

const SWITCHES = ['ingress', 'httpRoute', 'networkPolicy', 'externalSentinel', 'scaling'] as const;

/** `helm template` flags for one combination of the switches. */
function flags(on: ReadonlySet<string>): string[] {
  const set = (key: string, value: string | boolean) => ['--set', `${key}=${value}`];
  const out = [...set('ingress.enabled', on.has('ingress')), ...set('httpRoute.enabled', on.has('httpRoute'))];
  if (on.has('httpRoute')) out.push(...set('httpRoute.parentRefs[0].name', 'shared'), ...set('httpRoute.parentRefs[0].sectionName', 'https'));
  out.push(...set('networkPolicy.enabled', on.has('networkPolicy')));
  if (on.has('networkPolicy')) out.push(...set('networkPolicy.ingress.namespaces[0]', 'gateway-system'));
  if (on.has('externalSentinel')) {
    out.push(...set('redis.enabled', false), '--set', 'config.redis.url=null', ...set('config.redis.mode', 'sentinel'));
    out.push(...set('config.redis.sentinels[0]', 'sentinel-0.data:26379'), ...set('config.redis.name', 'mymaster'), ...set('externalRedis.tls.existingSecret', 'redis-tls'));
  }
  out.push(...set('autoscaling.enabled', on.has('scaling')), ...set('metrics.serviceMonitor.enabled', on.has('scaling')), ...set('podDisruptionBudget.enabled', on.has('scaling')));
  return out;
}

describe('rendered by helm', { skip: helm ? false : 'no helm binary (set HELM_BIN); the static checks above still ran' }, () => {
  test('helm lint passes with httpRoute and networkPolicy on, and with the production values', async () => {
    await run(helm!, ['lint', join(ROOT, CHART), ...flags(new Set(['httpRoute', 'networkPolicy']))]);
    await run(helm!, ['lint', join(ROOT, CHART), '-f', join(ROOT, PRODUCTION)]);
  });

  test(`every combination of ${SWITCHES.join(', ')} renders objects valid by their API schemas`, async () => {
    for (let mask = 0; mask < 2 ** SWITCHES.length; mask++) {
      const on = new Set(SWITCHES.filter((_, i) => mask & (1 << i)));
      const label = [...on].join('+') || 'defaults';
      const docs = await render(...flags(on));
      const kinds = docs.map((d) => d.kind as string);
      checkRender(docs, { REDIS_URL: 'redis://switchboard-redis:6379/0' }, label);
      assert.equal(kinds.includes('HTTPRoute'), on.has('httpRoute'), label);
      assert.equal(kinds.includes('Ingress'), on.has('ingress'), label);
      assert.equal(kinds.includes('StatefulSet'), !on.has('externalSentinel'), label);
      const gatewayPolicy = docs.some((d) => d.kind === 'NetworkPolicy' && d.metadata.name === 'switchboard');
      assert.equal(gatewayPolicy, on.has('networkPolicy'), label);
      assert.equal(kinds.includes('HorizontalPodAutoscaler'), on.has('scaling'), label);
    }
  });

  test('the HTTPRoute: parentRefs, hostnames, the Service port, the long timeouts', async () => {
    const docs = await render(...flags(new Set(['httpRoute'])));
    const route = docs.find((d) => d.kind === 'HTTPRoute')!;
    assert.deepEqual(route.spec.parentRefs, [{ name: 'shared', sectionName: 'https' }]);
    assert.deepEqual(route.spec.hostnames, [new URL(values.config.publicUrl).host]);
    const [rule] = route.spec.rules;
    assert.deepEqual(rule.matches, [{ path: { type: 'PathPrefix', value: '/' } }]);
    assert.deepEqual(rule.backendRefs, [{ name: 'switchboard', port: values.service.port }]);
    assert.deepEqual(rule.timeouts, { request: '1h', backendRequest: '1h' });
  });

  test('the NetworkPolicy: in only from the named namespace to the API port; out to DNS and the bundled Redis only', async () => {
    const docs = await render(...flags(new Set(['networkPolicy'])));
    const policy = docs.find((d) => d.kind === 'NetworkPolicy' && d.metadata.name === 'switchboard')!;
    assert.deepEqual(policy.spec.podSelector.matchLabels['app.kubernetes.io/component'], 'gateway');
    assert.deepEqual(policy.spec.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(policy.spec.ingress, [
      { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'gateway-system' } } }], ports: [{ port: 'http', protocol: 'TCP' }] },
    ]);
    const egress = policy.spec.egress as Values[];
    assert.equal(egress.length, 2, 'DNS and the bundled Redis, nothing else');
    assert.deepEqual(egress[0]!.ports.map((p: Values) => `${p.port}/${p.protocol}`), ['53/UDP', '53/TCP']);
    assert.equal(egress[1]!.to[0].podSelector.matchLabels['app.kubernetes.io/component'], 'redis');
    assert.deepEqual(egress[1]!.ports, [{ port: values.redis.port, protocol: 'TCP' }]);
  });

  test('a NetworkPolicy that would let nothing in fails at render time, naming the value', async () => {
    await assert.rejects(render('--set', 'networkPolicy.enabled=true'), /networkPolicy\.ingress\.namespaces or networkPolicy\.ingress\.from/);
  });

  test('the production values: Sentinel with TLS, HTTPRoute on the HTTPS listener, policy, HPA, PDB, ServiceMonitor', async () => {
    const docs = await render('-f', join(ROOT, PRODUCTION));
    const env = { COOKIE_KEY: 'c'.repeat(40), TOKEN_KEY: 't'.repeat(40), LOGIN_SECRET: 'l', GH_CLIENT_ID: 'g', GH_CLIENT_SECRET: 'g', REDIS_PASSWORD: 'p' };
    checkRender(docs, env, 'production');
    const kinds = new Set(docs.map((d) => d.kind as string));
    for (const kind of ['HTTPRoute', 'NetworkPolicy', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'ServiceMonitor']) assert.ok(kinds.has(kind), kind);
    assert.ok(!kinds.has('StatefulSet') && !kinds.has('Ingress'), 'no bundled Redis, no Ingress');
    const config = parseConfig(parseYaml(docs.find((d) => d.kind === 'ConfigMap')!.data['switchboard.yaml']), env);
    assert.equal(config.redis?.mode, 'sentinel');
    assert.ok(config.redis?.tls?.ca);
    const route = docs.find((d) => d.kind === 'HTTPRoute')!;
    assert.equal(route.spec.parentRefs[0].sectionName, 'https');
    assert.ok(route.spec.hostnames.includes(new URL(config.publicUrl).host), 'the route serves the host of publicUrl');
    const deployment = docs.find((d) => d.kind === 'Deployment')!;
    assert.ok(deployment.spec.template.spec.volumes.some((v: Values) => v.secret?.secretName === 'switchboard-redis-tls'));
    const policy = docs.find((d) => d.kind === 'NetworkPolicy')!;
    const egressPorts = (policy.spec.egress as Values[]).flatMap((r) => r.ports.map((p: Values) => p.port));
    for (const port of [53, 6379, 26379, 443, 8080]) assert.ok(egressPorts.includes(port), `egress to port ${port}`);
    assert.equal(policy.spec.ingress[1].ports[0].port, 'metrics', 'Prometheus reaches only the metrics port');
  });
});
