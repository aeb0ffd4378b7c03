/**
 * The Helm chart (SPEC §6). CI has no helm binary, so the chart is checked statically:
 * Chart.yaml and values parse, values validate against values.schema.json (ajv), every
 * `.Values` path a template uses exists, template blocks balance, every manifest template
 * has apiVersion/kind/metadata, the Deployment's probes and hardening are in place, and the
 * config the ConfigMap renders (`toYaml .Values.config`) is a valid Switchboard config by
 * the app's own parser. When a helm binary is available (HELM_BIN or `helm` on PATH), the
 * chart is also linted and rendered for real.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { RESTART_ONLY_KEYS } from '../../src/reload/restart-keys.js';
import { ROOT, blockProblems, helmBinary, coalesceValues, execForm, hasPath, parseDockerfile, readRepoFile, templateActions, valuesPaths, withoutActions } from './support.js';

const run = promisify(execFile);
const CHART = 'helm/switchboard';
const TEMPLATES = `${CHART}/templates`;

type Values = Record<string, any>;

const chart = parseYaml(readRepoFile(`${CHART}/Chart.yaml`)) as Record<string, unknown>;
const values = parseYaml(readRepoFile(`${CHART}/values.yaml`)) as Values;
const productionOverrides = parseYaml(readRepoFile(`${CHART}/ci/production-values.yaml`)) as Values;
const production = coalesceValues(values, productionOverrides) as Values;
const schema = JSON.parse(readRepoFile(`${CHART}/values.schema.json`)) as Record<string, unknown>;
const templateFiles = readdirSync(join(ROOT, TEMPLATES)).sort();
const template = (name: string) => readRepoFile(`${TEMPLATES}/${name}`);
const manifestTemplates = templateFiles.filter((f) => f.endsWith('.yaml'));
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };
const dockerfile = parseDockerfile(readRepoFile('Dockerfile'));
const finalStage = dockerfile.stages.at(-1)!;
const [imageConfigPath] = execForm(finalStage.instructions.filter((i) => i.keyword === 'CMD').at(-1)!.args)!.slice(-1);
const imageNode = execForm(finalStage.instructions.filter((i) => i.keyword === 'ENTRYPOINT').at(-1)!.args)![0]!;

const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });
// The config block is the generated config schema (schema/switchboard.schema.json), which uses `format: uri`.
addFormats.default(ajv);
const validateValues = ajv.compile(schema);

function schemaErrors(candidate: unknown): string {
  return validateValues(candidate) ? '' : ajv.errorsText(validateValues.errors);
}

/** The values the chart passes through as REDIS_URL for the bundled Redis of release "switchboard". */
const BUNDLED_REDIS_URL = 'redis://switchboard-redis:6379/0';

/** The `${VAR}` names the gateway will look up in a config (its own placeholder syntax). */
function placeholders(config: unknown): string[] {
  return [...new Set([...JSON.stringify(config).matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!))].sort();
}

describe('Chart.yaml', () => {
  test('is a v2 application chart whose appVersion is the package version', () => {
    assert.equal(chart.apiVersion, 'v2');
    assert.equal(chart.name, 'switchboard');
    assert.equal(chart.type, 'application');
    assert.match(String(chart.version), /^\d+\.\d+\.\d+(-[\w.]+)?$/);
    assert.equal(chart.appVersion, pkg.version);
    assert.ok(chart.kubeVersion, 'kubeVersion states the API versions the templates need');
  });
});

describe('values.yaml and values.schema.json', () => {
  test('the schema is a draft-07 schema ajv compiles in strict mode', () => {
    assert.equal(schema.$schema, 'http://json-schema.org/draft-07/schema#');
  });

  test('the default values validate', () => {
    assert.equal(schemaErrors(values), '');
  });

  test('the production-shaped values (ci/production-values.yaml over the defaults) validate', () => {
    assert.equal(schemaErrors(production), '');
  });

  test('the schema rejects what would break an install', () => {
    const broken: Array<[string, (v: Values) => void]> = [
      ['a grace period shorter than the 25 s shutdown deadline', (v) => (v.terminationGracePeriodSeconds = 20)],
      ['an unknown top-level key (typo)', (v) => (v.replicas = 3)],
      ['a backend name that is not a path segment', (v) => (v.config.backends[0].name = 'My Backend')],
      ['no backends', (v) => (v.config.backends = [])],
      ['a non-URL publicUrl', (v) => (v.config.publicUrl = 'mcp.example.com')],
      ['a non-redis externalRedis.url', (v) => (v.externalRedis.url = 'http://redis:6379')],
      ['root as the user', (v) => (v.securityContext.runAsUser = 0)],
      ['an env var name that cannot be one', (v) => (v.secrets.values = { 'COOKIE-KEY': 'x' })],
    ];
    for (const [what, mutate] of broken) {
      const candidate = structuredClone(values);
      mutate(candidate);
      assert.notEqual(schemaErrors(candidate), '', `schema accepted ${what}`);
    }
  });

  test("every key the schema describes under `config` is one the app's config schema knows", async () => {
    const { configSchema } = await import('../../src/config/schema.js');
    // zod: ZodEffects (superRefine) → ZodObject
    const shape = (configSchema as unknown as { _def: { schema: { shape: Record<string, unknown> } } })._def.schema.shape;
    const described = Object.keys(((schema.properties as Values).config as Values).properties as Values);
    for (const key of described) assert.ok(key in shape, `values.schema.json describes config.${key}, which the gateway rejects`);
  });
});

describe('the rendered Switchboard config (ConfigMap = toYaml .Values.config)', () => {
  test('the ConfigMap renders .Values.config as it is, under the file name the image reads', () => {
    const text = template('configmap.yaml');
    const file = imageConfigPath!.split('/').at(-1)!;
    assert.match(text, new RegExp(`\\n  ${file.replace('.', '\\.')}: \\|\\n    \\{\\{- toYaml \\.Values\\.config \\| nindent 4 \\}\\}\\n`));
    const deployment = template('deployment.yaml');
    assert.match(deployment, new RegExp(`mountPath: ${imageConfigPath!.slice(0, -file.length - 1).replace(/\//g, '\\/')}\\n`));
  });

  test("the default config is valid by the gateway's own parser, with REDIS_URL as the chart sets it", () => {
    // The YAML round trip stands in for toYaml → ConfigMap → the gateway reading the file.
    const rendered = parseYaml(stringifyYaml(values.config)) as unknown;
    assert.deepEqual(placeholders(rendered), ['REDIS_URL'], 'the default config needs no secret');
    const config = parseConfig(rendered, { REDIS_URL: BUNDLED_REDIS_URL });
    assert.equal(config.redis?.url, BUNDLED_REDIS_URL);
    assert.equal(config.listen.port, 8080);
    assert.throws(() => parseConfig(rendered, {}), /REDIS_URL/);
  });

  test('the production-shaped config is valid with the variables its Secret provides', () => {
    const rendered = parseYaml(stringifyYaml(production.config)) as unknown;
    const needed = placeholders(rendered);
    // External Redis behind Sentinel (issue 32 §3): its password, not a REDIS_URL.
    assert.deepEqual(needed, ['COOKIE_KEY', 'GH_CLIENT_ID', 'GH_CLIENT_SECRET', 'LOGIN_SECRET', 'REDIS_PASSWORD', 'TOKEN_KEY']);
    const env = Object.fromEntries(needed.map((n) => [n, `${n.toLowerCase()}-`.padEnd(40, 'x')]));
    const config = parseConfig(rendered, env);
    assert.equal(config.redis?.mode, 'sentinel');
    assert.equal(config.backends.length, 2);
    assert.equal(config.auth.requiredScopes[0], 'mcp');
    assert.equal(config.listen.port, 8080, 'defaults merged under the override, as Helm does');
  });

  test("the chart's ${VAR} check finds the same variables as the gateway", () => {
    const helpers = template('_helpers.tpl');
    const literal = /regexFindAll ("(?:[^"\\]|\\.)*")/.exec(helpers)?.[1];
    assert.ok(literal, 'the validate helper scans the config with regexFindAll');
    const pattern = new RegExp(JSON.parse(literal) as string, 'g');
    for (const config of [values.config, production.config]) {
      const text = stringifyYaml(config).replaceAll('$${', '');
      const found = [...new Set([...text.matchAll(pattern)].map((m) => m[0].slice(2, -1)))].sort();
      assert.deepEqual(found, placeholders(config));
    }
  });
});

describe('templates', () => {
  test('the chart has every object SPEC §6 asks for', () => {
    const kinds = new Map<string, string>();
    for (const file of manifestTemplates) {
      const text = withoutActions(template(file));
      for (const m of text.matchAll(/^apiVersion: (\S+)\nkind: (\S+)$/gm)) kinds.set(m[2]!, m[1]!);
    }
    assert.deepEqual(Object.fromEntries([...kinds].sort()), {
      ConfigMap: 'v1',
      Deployment: 'apps/v1',
      HTTPRoute: 'gateway.networking.k8s.io/v1',
      HorizontalPodAutoscaler: 'autoscaling/v2',
      Ingress: 'networking.k8s.io/v1',
      NetworkPolicy: 'networking.k8s.io/v1',
      PodDisruptionBudget: 'policy/v1',
      PrometheusRule: 'monitoring.coreos.com/v1',
      Secret: 'v1',
      Service: 'v1',
      ServiceAccount: 'v1',
      ServiceMonitor: 'monitoring.coreos.com/v1',
      StatefulSet: 'apps/v1',
    });
    assert.ok(templateFiles.includes('NOTES.txt'));
    assert.ok(templateFiles.includes('_helpers.tpl'));
  });

  test('every manifest document has apiVersion, kind and metadata with a name', () => {
    for (const file of manifestTemplates) {
      const docs = withoutActions(template(file)).split(/^---$/m);
      for (const doc of docs) {
        if (doc.replace(/^\s*#.*$/gm, '').trim() === '') continue;
        for (const key of ['apiVersion', 'kind', 'metadata']) assert.match(doc, new RegExp(`^${key}:`, 'm'), `${file}: a document without ${key}`);
        assert.match(doc, /^metadata:\n(?: {2}.*\n)*? {2}name: /m, `${file}: metadata without name`);
      }
    }
  });

  test('{{ }} delimiters and if/range/with/define … end blocks balance in every template', () => {
    for (const file of templateFiles) {
      const text = template(file);
      const opens = text.split('{{').length - 1;
      const closes = text.split('}}').length - 1;
      assert.equal(opens, closes, `${file}: ${opens} {{ vs ${closes} }}`);
      assert.doesNotThrow(() => templateActions(text), `${file}: unterminated action`);
      assert.deepEqual(blockProblems(text), [], file);
    }
  });

  test('every .Values path a template uses exists in values.yaml', () => {
    let count = 0;
    for (const file of templateFiles) {
      for (const path of valuesPaths(template(file))) {
        count++;
        assert.ok(hasPath(values, path), `${file}: .Values.${path.join('.')} is not in values.yaml`);
      }
    }
    assert.ok(count > 50, `only ${count} .Values references found`);
  });

  test('every template include names a defined helper', () => {
    const defined = new Set([...template('_helpers.tpl').matchAll(/\{\{-? define "([^"]+)"/g)].map((m) => m[1]!));
    for (const file of templateFiles) {
      for (const m of template(file).matchAll(/include "([^"]+)"/g)) assert.ok(defined.has(m[1]!), `${file}: include "${m[1]}" is not defined`);
    }
  });

  test('optional objects are behind their switches', () => {
    const guards: Record<string, RegExp> = {
      'ingress.yaml': /\{\{- if \.Values\.ingress\.enabled \}\}/,
      'hpa.yaml': /\{\{- if \.Values\.autoscaling\.enabled \}\}/,
      'servicemonitor.yaml': /\{\{- if \.Values\.metrics\.serviceMonitor\.enabled \}\}/,
      'serviceaccount.yaml': /\{\{- if \.Values\.serviceAccount\.create \}\}/,
      'redis.yaml': /\{\{- if \.Values\.redis\.enabled \}\}/,
      'secret.yaml': /\{\{- if and \.Values\.secrets\.values \(not \.Values\.secrets\.existingSecret\) \}\}/,
      'pdb.yaml': /\{\{- if and \.Values\.podDisruptionBudget\.enabled/,
    };
    for (const [file, guard] of Object.entries(guards)) {
      const first = template(file).replace(/^\{\{-? \/\*[\s\S]*?\*\/\s*-?\}\}\n?/, '').trimStart();
      assert.match(first.split('\n')[0]!, guard, `${file} starts with its guard`);
    }
  });
});

describe('the Deployment', () => {
  const deployment = template('deployment.yaml');

  test('probes: startup and liveness on /healthz, readiness on /readyz, all on the named port', () => {
    for (const [probe, path] of [['startupProbe', '/healthz'], ['livenessProbe', '/healthz'], ['readinessProbe', '/readyz']] as const) {
      assert.match(deployment, new RegExp(`${probe}:\\n\\s+httpGet:\\n\\s+path: ${path}\\n\\s+port: http\\n`), probe);
    }
    assert.match(deployment, /- name: http\n\s+containerPort: \{\{ include "switchboard\.port" \. \}\}/);
  });

  test('pod and container security contexts are hardened in the template itself', () => {
    const pod = /\n {6}securityContext:\n((?: {8}.*\n)+)/.exec(deployment)?.[1] ?? '';
    const container = /\n {10}securityContext:\n((?: {12}.*\n)+)/.exec(deployment)?.[1] ?? '';
    for (const line of ['runAsNonRoot: true', 'seccompProfile:', 'type: RuntimeDefault']) assert.ok(pod.includes(line), `pod securityContext: ${line}`);
    for (const line of ['runAsNonRoot: true', 'readOnlyRootFilesystem: true', 'allowPrivilegeEscalation: false', 'privileged: false', 'drop:', '- ALL', 'type: RuntimeDefault']) {
      assert.ok(container.includes(line), `container securityContext: ${line}`);
    }
    const uid = /^USER (\d+)/m.exec(readRepoFile('Dockerfile'))?.[1];
    assert.equal(String(values.securityContext.runAsUser), uid, "values' runAsUser is the image's USER");
  });

  test('a writable /tmp emptyDir and the read-only config volume', () => {
    assert.match(deployment, /- name: tmp\n\s+mountPath: \/tmp\n/);
    assert.match(deployment, /- name: tmp\n\s+emptyDir:\n\s+sizeLimit: \{\{ \.Values\.tmpSizeLimit \}\}/);
    assert.match(deployment, /- name: config\n\s+mountPath: \/etc\/switchboard\n\s+readOnly: true/);
    assert.match(deployment, /configMap:\n\s+name: \{\{ include "switchboard\.fullname" \. \}\}/);
  });

  test('rolling update, replicas unless the HPA owns them, spread, config checksum', () => {
    assert.match(deployment, /type: RollingUpdate\n\s+rollingUpdate:\n\s+maxSurge: .*\n\s+maxUnavailable: /);
    assert.match(deployment, /\{\{- if not \.Values\.autoscaling\.enabled \}\}\n\s+replicas: \{\{ \.Values\.replicaCount \}\}/);
    assert.match(deployment, /topologySpreadConstraints:/);
    assert.match(deployment, /checksum\/config: \{\{ include \(print \$\.Template\.BasePath "\/configmap\.yaml"\) \. \| sha256sum \}\}/);
    assert.match(deployment, /checksum\/config-restart-only: \{\{ include "switchboard\.restartOnlyConfig" \. \| sha256sum \}\}/);
    assert.equal(values.rollingUpdate.maxUnavailable, 0, 'no capacity is removed before a new pod is ready');
  });

  test('configReload.rollOnChange restartOnly hashes exactly the keys the gateway cannot reload (src/reload/restart-keys.ts)', () => {
    const helper = template('_helpers.tpl');
    const quoted = (text: string) => [...text.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
    const whole = quoted(/range \$k := list ((?:"[^"]+" ?)+)/.exec(helper)![1]!);
    const nested = [...helper.matchAll(/set \$keep "(\w+)" \(pick \(\$c\.\w+ \| default dict\) ((?:"[^"]+" ?)+)\)/g)].flatMap((m) => quoted(m[2]!).map((k) => `${m[1]}.${k}`));
    assert.deepEqual([...whole, ...nested].sort(), [...RESTART_ONLY_KEYS].sort());
    assert.equal(values.configReload.rollOnChange, 'restartOnly');
  });

  test('shutdown: preStop delay runs the image node, and the grace period covers it plus the 25 s drain', () => {
    assert.match(deployment, new RegExp(`command:\\n\\s+- ${imageNode.replace(/\//g, '\\/')}\\n\\s+- -e\\n\\s+- \\{\\{ printf "setTimeout`));
    assert.match(deployment, /sleep:\n\s+seconds: \{\{ \.Values\.preStop\.seconds \}\}/);
    assert.match(deployment, /terminationGracePeriodSeconds: \{\{ \.Values\.terminationGracePeriodSeconds \}\}/);
    // The gateway's hard deadline after SIGTERM: 25 s (shutdown.drainTimeout + 5 s where the config has it).
    const parsed = parseConfig(values.config, { REDIS_URL: BUNDLED_REDIS_URL }) as { shutdown?: { drainTimeout?: number } };
    const deadline = parsed.shutdown?.drainTimeout !== undefined ? parsed.shutdown.drainTimeout / 1000 + 5 : 25;
    assert.ok(values.terminationGracePeriodSeconds >= values.preStop.seconds + deadline + 5, 'grace ≥ preStop + shutdown deadline + margin');
  });

  test('secrets reach the container as environment from Secret references, never inline', () => {
    assert.match(deployment, /envFrom:\n\s+- secretRef:\n\s+name: \{\{ \. \}\}/);
    assert.match(deployment, /secretKeyRef:\n\s+name: \{\{ \.Values\.externalRedis\.existingSecret \}\}\n\s+key: \{\{ \.Values\.externalRedis\.existingSecretKey \}\}/);
    assert.match(template('secret.yaml'), /stringData:\n\s+\{\{- range \$key, \$value := \.Values\.secrets\.values \}\}/);
    assert.deepEqual(values.secrets, { existingSecret: '', values: {} }, 'no secret material in the defaults');
  });

  test('REDIS_URL: bundled → redis://<fullname>-redis:<port>/0, else externalRedis', () => {
    const helpers = template('_helpers.tpl');
    assert.match(helpers, /define "switchboard\.redis\.url" -\}\}\n\{\{- printf "redis:\/\/%s:%d\/0" \(include "switchboard\.redis\.fullname" \.\) \(int \.Values\.redis\.port\) \}\}/);
    assert.match(helpers, /define "switchboard\.redis\.fullname" -\}\}\n\{\{- printf "%s-redis"/);
    // The client Service of the bundled Redis carries that name and port.
    assert.match(template('redis.yaml'), /kind: Service\nmetadata:\n\s+name: \{\{ include "switchboard\.redis\.fullname" \. \}\}\n[\s\S]*?port: \{\{ \.Values\.redis\.port \}\}/);
    assert.match(deployment, /\{\{- if \.Values\.redis\.enabled \}\}\n\s+- name: REDIS_URL\n\s+value: \{\{ include "switchboard\.redis\.url" \. \| quote \}\}/);
    assert.equal(values.redis.enabled, true);
    assert.equal(values.config.redis.url, '${REDIS_URL}');
  });
});

describe('Ingress, Service, autoscaling', () => {
  test('SSE-safe ingress-nginx defaults: no buffering either way, timeouts of at least an hour', () => {
    const a = values.ingress.annotations as Record<string, string>;
    assert.equal(a['nginx.ingress.kubernetes.io/proxy-buffering'], 'off');
    assert.equal(a['nginx.ingress.kubernetes.io/proxy-request-buffering'], 'off');
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-read-timeout']) >= 3600);
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-send-timeout']) >= 3600);
    for (const value of Object.values(a)) assert.equal(typeof value, 'string', 'annotation values must be strings');
  });

  test('the Ingress has TLS and routes to the Service port by name', () => {
    const ingress = template('ingress.yaml');
    assert.match(ingress, /tls:\n\s+\{\{- range \. \}\}\n\s+- hosts:/);
    assert.match(ingress, /service:\n\s+name: \{\{ include "switchboard\.fullname" \$ \}\}\n\s+port:\n\s+name: http/);
    assert.ok(values.ingress.tls.length > 0);
    assert.match(template('service.yaml'), /- name: http\n\s+port: \{\{ \.Values\.service\.port \}\}\n\s+targetPort: http/);
  });

  test('the HPA targets the Deployment and the PDB and ServiceMonitor select the gateway pods', () => {
    assert.match(template('hpa.yaml'), /scaleTargetRef:\n\s+apiVersion: apps\/v1\n\s+kind: Deployment\n\s+name: \{\{ include "switchboard\.fullname" \. \}\}/);
    assert.match(template('pdb.yaml'), /matchLabels:\n\s+\{\{- include "switchboard\.selectorLabels" \. \| nindent 6 \}\}/);
    const monitor = template('servicemonitor.yaml');
    // The API port, or the `metrics` port when config.metrics.listen moves /metrics there;
    // with config.metrics.bearerToken, the token from a Secret key (issue 13).
    assert.match(monitor, /\{\{- if gt \(include "switchboard\.metricsPort" \. \| int\) 0 \}\}\n(?:\s+#.*\n)?\s+- port: metrics\n\s+\{\{- else \}\}\n(?:\s+#.*\n)?\s+- port: http\n\s+\{\{- end \}\}\n\s+path: \/metrics/);
    assert.match(monitor, /authorization:\n\s+type: Bearer\n\s+credentials:\n\s+name: .*\n\s+key: \{\{ \. \}\}/);
    assert.match(template('service.yaml'), /- name: metrics\n\s+port: \{\{ \. \}\}\n\s+targetPort: metrics/);
    assert.match(template('deployment.yaml'), /- name: metrics\n\s+containerPort: \{\{ \. \}\}/);
    // Gateway and Redis selectors differ by component, so neither selects the other's pods.
    const helpers = template('_helpers.tpl');
    assert.match(helpers, /define "switchboard\.selectorLabels" -\}\}\n(?:.*\n){2}app\.kubernetes\.io\/component: gateway/);
    assert.match(helpers, /define "switchboard\.redis\.selectorLabels" -\}\}\n(?:.*\n){2}app\.kubernetes\.io\/component: redis/);
  });
});

describe('Redis modes (issue 17): standalone, cluster, sentinel, TLS', () => {
  const withRedis = (redis: Values, tls = '') => {
    const v = structuredClone(values);
    v.config.redis = redis;
    v.redis.enabled = false;
    v.externalRedis.tls.existingSecret = tls;
    return v;
  };
  const cluster = { mode: 'cluster', nodes: ['rediss://redis-cluster-0.redis:6379'], password: '${REDIS_PASSWORD}', tls: { ca: '/etc/switchboard-redis-tls/ca.crt' } };
  const sentinel = { mode: 'sentinel', sentinels: ['redis-sentinel-0.redis:26379', 'redis-sentinel-1.redis:26379'], name: 'mymaster', password: '${REDIS_PASSWORD}' };

  test('cluster and sentinel values validate, and render a config the gateway accepts', () => {
    for (const redis of [cluster, sentinel]) {
      const v = withRedis(redis, 'switchboard-redis-tls');
      assert.equal(schemaErrors(v), '', redis.mode);
      const config = parseConfig(parseYaml(stringifyYaml(v.config)), { REDIS_PASSWORD: 'pw' });
      assert.equal(config.redis?.mode, redis.mode);
      assert.equal(config.redis?.password, 'pw');
    }
  });

  test('the schema rejects a mode without what it needs', () => {
    const broken: Array<[string, Values]> = [
      ['cluster without nodes', { mode: 'cluster' }],
      ['sentinel without the master name', { mode: 'sentinel', sentinels: ['s:26379'] }],
      ['standalone without url', { mode: 'standalone' }],
      ['an unknown mode', { mode: 'replicated', url: 'redis://r:6379' }],
      ['a seed that is not a redis URL', { mode: 'cluster', nodes: ['redis-0:6379'] }],
      ['an unknown tls key', { url: 'rediss://r:6380', tls: { insecure: true } }],
    ];
    for (const [what, redis] of broken) assert.notEqual(schemaErrors(withRedis(redis)), '', `schema accepted ${what}`);
  });

  test('the TLS Secret is mounted where config.redis.tls points; the bundled Redis refuses cluster and sentinel', () => {
    const deployment = template('deployment.yaml');
    assert.match(deployment, /\{\{- if \.Values\.externalRedis\.tls\.existingSecret \}\}\n\s+# .*\n\s+- name: redis-tls\n\s+mountPath: \{\{ \.Values\.externalRedis\.tls\.mountPath \}\}\n\s+readOnly: true/);
    assert.match(deployment, /- name: redis-tls\n\s+secret:\n\s+secretName: \{\{ \.Values\.externalRedis\.tls\.existingSecret \}\}/);
    assert.equal(values.externalRedis.tls.mountPath, cluster.tls.ca.split('/').slice(0, -1).join('/'));
    assert.match(template('_helpers.tpl'), /\{\{- if and \.Values\.redis\.enabled \(has \(dig "redis" "mode" "standalone" \.Values\.config\) \(list "cluster" "sentinel"\)\) \}\}\n\{\{- fail "config\.redis\.mode is cluster or sentinel/);
  });
});

const helm = helmBinary();
if (!helm && process.env.SB_REQUIRE_HELM === '1') throw new Error('SB_REQUIRE_HELM=1 but no helm binary was found (run scripts/fetch-helm.sh)');

describe('rendered by helm', { skip: helm ? false : 'no helm binary (set HELM_BIN); the static checks above still ran' }, () => {
  async function render(...args: string[]) {
    const { stdout } = await run(helm!, ['template', 'switchboard', join(ROOT, CHART), '--namespace', 'mcp', ...args], { maxBuffer: 10_000_000 });
    return parseAllDocuments(stdout).map((d) => d.toJS() as Values).filter(Boolean);
  }

  test('helm lint passes', async () => {
    await run(helm!, ['lint', join(ROOT, CHART)]);
    await run(helm!, ['lint', join(ROOT, CHART), '-f', join(ROOT, CHART, 'ci/production-values.yaml')]);
  });

  test('the default render: config valid, REDIS_URL wired to the bundled Redis Service', async () => {
    const docs = await render();
    const cm = docs.find((d) => d.kind === 'ConfigMap')!;
    const deploy = docs.find((d) => d.kind === 'Deployment')!;
    const redisUrl = deploy.spec.template.spec.containers[0].env.find((e: Values) => e.name === 'REDIS_URL').value as string;
    assert.equal(redisUrl, BUNDLED_REDIS_URL);
    assert.ok(docs.some((d) => d.kind === 'Service' && d.metadata.name === 'switchboard-redis'));
    const config = parseConfig(parseYaml(cm.data['switchboard.yaml']), { REDIS_URL: redisUrl });
    assert.equal(config.redis?.url, redisUrl);
  });

  test('configReload.rollOnChange: restartOnly rolls on restart-only keys only, all on any change, never not at all', async () => {
    const annotations = async (...args: string[]) => ((await render(...args)).find((d) => d.kind === 'Deployment')!.spec.template.metadata.annotations ?? {}) as Record<string, string>;
    const reloadable = ['--set', 'config.aggregate.fanoutTimeout=9s'];
    const restartOnly = ['--set', 'config.publicUrl=https://other.example.com'];
    const base = await annotations();
    assert.match(base['checksum/config-restart-only'] ?? '', /^[0-9a-f]{64}$/);
    assert.equal(base['checksum/config'], undefined);
    assert.equal((await annotations(...reloadable))['checksum/config-restart-only'], base['checksum/config-restart-only'], 'a reloadable change does not roll the pods');
    assert.notEqual((await annotations(...restartOnly))['checksum/config-restart-only'], base['checksum/config-restart-only']);
    const all = ['--set', 'configReload.rollOnChange=all'];
    assert.notEqual((await annotations(...all, ...reloadable))['checksum/config'], (await annotations(...all))['checksum/config']);
    const never = await annotations('--set', 'configReload.rollOnChange=never', ...restartOnly);
    assert.deepEqual(Object.keys(never).filter((k) => k.startsWith('checksum/config')), []);
  });

  test('failures are caught at render time', async () => {
    await assert.rejects(render('--set', 'redis.enabled=false'), /REDIS_URL/);
    await assert.rejects(render('--set-string', 'config.secrets.cookieKey=${COOKIE_KEY}'), /COOKIE_KEY/);
    await assert.rejects(render('--set', 'terminationGracePeriodSeconds=10'), /terminationGracePeriodSeconds/);
  });
});
