/**
 * The Helm chart in broker mode (issue 19; helm/switchboard/ci/broker-values.yaml): the values
 * validate against values.schema.json, the schema refuses broker keys the gateway would
 * refuse, and the config the ConfigMap renders is a valid broker-mode config once the Secret
 * provides the signing keys (PEM files as environment variables) and the other secrets.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { coalesceValues, readRepoFile } from './support.js';

type Values = Record<string, any>;
const CHART = 'helm/switchboard';
const defaults = parseYaml(readRepoFile(`${CHART}/values.yaml`)) as Values;
const broker = coalesceValues(defaults, parseYaml(readRepoFile(`${CHART}/ci/broker-values.yaml`)) as Values) as Values;
const ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: true });
// The config block is the generated config schema (schema/switchboard.schema.json), which uses `format: uri`.
addFormats.default(ajv);
const validate = ajv.compile(JSON.parse(readRepoFile(`${CHART}/values.schema.json`)) as object);
const pem = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

test('the broker-mode values validate; the default values say resource-server', () => {
  assert.ok(validate(broker), ajv.errorsText(validate.errors));
  assert.equal(defaults.config.auth.mode, 'resource-server');
});

test('the schema refuses an unknown mode and unknown broker keys', () => {
  const withAuth = (auth: Values) => ({ ...broker, config: { ...broker.config, auth: { ...broker.config.auth, ...auth } } });
  assert.equal(validate(withAuth({ mode: 'proxy' })), false);
  assert.equal(validate(withAuth({ broker: { signingKey: 'x' } })), false);
  assert.equal(validate(withAuth({ broker: { signingKeys: [] } })), false);
});

test('the rendered config is a valid broker config with the variables its Secret provides', () => {
  const rendered = parseYaml(stringifyYaml(broker.config)) as unknown;
  const needed = [...new Set([...JSON.stringify(rendered).matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!))].sort();
  assert.deepEqual(needed, ['BROKER_SIGNING_KEY', 'BROKER_SIGNING_KEY_PREVIOUS', 'COOKIE_KEY', 'LOGIN_SECRET', 'REDIS_URL', 'TOKEN_KEY']);
  const keys = { BROKER_SIGNING_KEY: pem(), BROKER_SIGNING_KEY_PREVIOUS: pem() };
  const config = parseConfig(rendered, { ...keys, COOKIE_KEY: 'c'.repeat(44), TOKEN_KEY: 't'.repeat(44), LOGIN_SECRET: 'secret', REDIS_URL: 'redis://switchboard-redis:6379/0' });
  assert.equal(config.auth.mode, 'broker');
  assert.deepEqual(config.auth.broker.signingKeys, [keys.BROKER_SIGNING_KEY, keys.BROKER_SIGNING_KEY_PREVIOUS]);
  assert.equal(config.auth.broker.accessTokenTtl, 600_000);
});
