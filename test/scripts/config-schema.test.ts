/**
 * The published JSON Schema of the config file (issue 32 §2): generated, not written by hand,
 * and true to the gateway. The committed schema/switchboard.schema.json and the `config`
 * block of the Helm values schema must be what `npm run schema` writes now (CI fails when
 * they are stale); the schema must accept every config the repository ships (the embedded
 * default, the compose configs, the chart's values) and `${VAR}` wherever the loader
 * interpolates one, and agree with the loader on what it refuses.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { developmentConfigFile } from '../../src/config/default.js';
import { parseConfig } from '../../src/config/load.js';
import { coalesceValues } from '../deploy/support.js';
import { SCHEMA_COMMAND, SCHEMA_FILE, VALUES_SCHEMA_FILE, compactJson, generatedSchemaFiles } from '../../scripts/config-schema.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

type Json = Record<string, any>;

function compile(schema: Json): ValidateFunction {
  const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });
  addFormats.default(ajv);
  return ajv.compile(schema);
}

const schema = JSON.parse(read(SCHEMA_FILE)) as Json;
const validate = compile(schema);
const errors = (config: unknown) => (validate(config) ? '' : JSON.stringify(validate.errors?.slice(0, 3)));

/** The loader's verdict with the environment given: '' or its message. */
function loaderErrors(config: unknown, env: NodeJS.ProcessEnv = {}): string {
  try {
    parseConfig(config, env);
    return '';
  } catch (err) {
    return (err as Error).message;
  }
}

const minimal = () => ({
  publicUrl: 'https://mcp.example.com',
  auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
  backends: [{ name: 'docs', url: 'http://docs:8080/mcp' }],
});

describe('the published schema is up to date', () => {
  test(`${SCHEMA_FILE} and the config block of ${VALUES_SCHEMA_FILE} are what \`${SCHEMA_COMMAND}\` writes`, () => {
    for (const [file, expected] of generatedSchemaFiles()) {
      assert.ok(read(file) === expected, `${file} is stale: run \`${SCHEMA_COMMAND}\` and commit the result`);
    }
  });

  test('the Helm values schema embeds the same config schema (no copy of its own)', () => {
    const values = JSON.parse(read(VALUES_SCHEMA_FILE)) as Json;
    const { $schema: _d, title: _t, description: _a, ...published } = schema;
    const { description: _b, ...embedded } = values.properties.config as Json;
    assert.deepEqual(embedded, published);
  });

  test('compactJson keeps what fits on a line on one line, and round-trips', () => {
    const value = { a: [1, 2], b: { c: 'x'.repeat(120) } };
    assert.equal(compactJson({ a: [1, 2] }), '{"a": [1, 2]}');
    assert.deepEqual(JSON.parse(compactJson(value)), value);
    assert.match(compactJson(value), /^\{\n {2}"a": \[1, 2\],\n {2}"b": \{\n {4}"c": /);
  });
});

describe('the schema accepts the configs the repository ships', () => {
  test('the embedded development default', () => {
    assert.equal(errors(developmentConfigFile({ port: 8080, demoBackendUrl: 'http://127.0.0.1:3001/mcp' })), '');
  });

  for (const file of ['deploy/compose/switchboard.yaml', 'deploy/compose/switchboard-cluster.yaml']) {
    test(`${file}, which names the schema for editors`, () => {
      const text = read(file);
      assert.equal(errors(parseYaml(text)), '');
      const modeline = /^# yaml-language-server: \$schema=(\S+)$/m.exec(text)?.[1];
      assert.ok(modeline, 'a yaml-language-server $schema comment');
      assert.equal(join(ROOT, file, '..', modeline), join(ROOT, SCHEMA_FILE));
    });
  }

  for (const file of ['helm/switchboard/values.yaml', 'helm/switchboard/ci/production-values.yaml', 'helm/switchboard/ci/broker-values.yaml']) {
    test(`the config block of ${file} (with the chart defaults where it has none)`, () => {
      const values = parseYaml(read(file)) as Json;
      const defaults = parseYaml(read('helm/switchboard/values.yaml')) as Json;
      // Helm's merge (maps key by key, null deletes), as the ConfigMap gets it.
      const config = (coalesceValues(defaults, values) as Json).config;
      assert.equal(errors(config), '');
    });
  }
});

describe('the schema describes the file before ${VAR} interpolation', () => {
  test('${VAR} where the loader interpolates: URLs, enums, whole numbers, durations, patterns', () => {
    const config: Json = {
      ...minimal(),
      publicUrl: '${PUBLIC_URL}',
      listen: { port: '${PORT}' },
      redis: { mode: '${REDIS_MODE}', url: '${REDIS_URL}' },
      sessions: { idleTtl: '${IDLE}', maxPerUser: '${MAX}' },
      backends: [{ name: '${BACKEND}', url: 'http://${HOST}:8080/mcp', timeout: '${TIMEOUT}' }],
    };
    assert.equal(errors(config), '');
    const env = { PUBLIC_URL: 'https://mcp.example.com', PORT: '9090', REDIS_MODE: 'standalone', REDIS_URL: 'redis://r:6379', IDLE: '2h', MAX: '7', BACKEND: 'docs', HOST: 'docs', TIMEOUT: '90s' };
    assert.equal(loaderErrors(config, env), '', 'and the loader takes the same file');
  });

  test('a number written as a string of digits, as `${VAR}` yields it', () => {
    assert.equal(errors({ ...minimal(), listen: { port: '8080' } }), '');
    assert.equal(loaderErrors({ ...minimal(), listen: { port: '8080' } }), '');
  });

  test('booleans and plain numbers take no ${VAR}: the loader refuses the string, so does the schema', () => {
    for (const config of [
      { ...minimal(), limits: { rateLimit: { enabled: '${RATE_LIMIT}' } } },
      { ...minimal(), auth: { ...minimal().auth, broker: { registrationLimits: { perAddress: '${PER_ADDRESS}' } } } },
    ]) {
      assert.notEqual(errors(config), '', JSON.stringify(config));
      assert.notEqual(loaderErrors(config, { RATE_LIMIT: 'true', PER_ADDRESS: '5' }), '');
    }
  });
});

describe('the schema refuses what the loader refuses', () => {
  const broken: Array<[string, (c: Json) => void]> = [
    ['an unknown key (typo)', (c) => (c.logg = { level: 'debug' })],
    ['a backend name that is not a path segment', (c) => (c.backends[0].name = 'My Backend')],
    ['no backends', (c) => (c.backends = [])],
    ['a publicUrl that is not http(s)', (c) => (c.publicUrl = 'ftp://mcp.example.com')],
    ['a duration the loader cannot read', (c) => (c.sessions = { idleTtl: '30 minutes' })],
    ['a port out of range', (c) => (c.listen = { port: 70000 })],
    ['a port that is not a number', (c) => (c.listen = { port: 'http' })],
    ['an unknown log level', (c) => (c.log = { level: 'loud' })],
    ['redis cluster without nodes', (c) => (c.redis = { mode: 'cluster' })],
    ['redis sentinel without the master name', (c) => (c.redis = { mode: 'sentinel', sentinels: ['s:26379'] })],
    ['redis standalone without url', (c) => (c.redis = {})],
    ['a missing auth block', (c) => delete c.auth],
  ];
  for (const [what, mutate] of broken) {
    test(what, () => {
      const config = minimal() as Json;
      mutate(config);
      assert.notEqual(errors(config), '', 'schema accepted it');
      assert.notEqual(loaderErrors(config), '', 'the loader accepted it: the case is wrong');
    });
  }
});
