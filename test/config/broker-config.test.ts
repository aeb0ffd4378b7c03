/**
 * `auth.mode` and `auth.broker` (SPEC §8 "Broker mode"; src/config/broker-schema.ts): the
 * defaults, keys from `${VAR}`, and an error naming the key for every configuration that
 * cannot work — never quoting a key it refuses.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

const pem = (type: 'ec' | 'rsa' | 'ed25519', bits = 2048) =>
  (type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: bits }) : generateKeyPairSync('ed25519')).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

function config(auth: Record<string, unknown> = {}, more: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    publicUrl: 'https://mcp.example.com',
    auth: { mode: 'broker', issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp', login: { clientId: 'switchboard', clientSecret: 's' }, ...auth },
    backends: [{ name: 'hr', url: 'https://hr.example.com/mcp' }],
    ...more,
  };
}

function fails(input: Record<string, unknown>, key: string, problem: RegExp): ConfigError {
  let caught: unknown;
  assert.throws(
    () => parseConfig(input),
    (err: unknown) => {
      caught = err;
      return err instanceof ConfigError && err.key === key && problem.test(err.message);
    },
  );
  return caught as ConfigError;
}

test('resource-server is the default mode; broker mode has working defaults', () => {
  const plain = parseConfig({ ...config(), auth: { issuer: 'https://login.example.com', audience: 'api' } });
  assert.equal(plain.auth.mode, 'resource-server');
  const broker = parseConfig(config()).auth.broker;
  assert.deepEqual(broker, {
    registration: true,
    clientIdMetadataDocuments: true,
    accessTokenTtl: 600_000,
    refreshTokenTtl: 30 * 86_400_000,
    registrationLimits: { perAddress: 30, window: 600_000, total: 10_000, unusedClientTtl: 6 * 3_600_000, ipv6Prefix: 64 },
  });
});

test('registration limits (issue 28 §4): set, and refused out of range naming the key', () => {
  const limits = parseConfig(config({ broker: { registrationLimits: { perAddress: 5, window: '1h', total: 200, unusedClientTtl: '2h', ipv6Prefix: 48 } } })).auth.broker.registrationLimits;
  assert.deepEqual(limits, { perAddress: 5, window: 3_600_000, total: 200, unusedClientTtl: 7_200_000, ipv6Prefix: 48 });
  fails(config({ broker: { registrationLimits: { perAddress: 0 } } }), 'auth.broker.registrationLimits.perAddress', /greater than or equal to 1/);
  fails(config({ broker: { registrationLimits: { unusedClientTtl: '30d' } } }), 'auth.broker.registrationLimits.unusedClientTtl', /between 10s and 7d/);
  fails(config({ broker: { registrationLimits: { perMinute: 3 } } }), 'auth.broker.registrationLimits', /perMinute/);
  fails(config({ broker: { registrationLimits: { ipv6Prefix: 129 } } }), 'auth.broker.registrationLimits.ipv6Prefix', /less than or equal to 128/);
  fails(config({ broker: { registrationLimits: { ipv6Prefix: 0 } } }), 'auth.broker.registrationLimits.ipv6Prefix', /greater than or equal to 1/);
});

test('listen.trustProxy (issue 28 §4): addresses, CIDRs and named ranges; a hop count or a bad CIDR is refused', () => {
  const trusted = ['10.0.0.0/8', 'fc00::/7', '192.0.2.7', 'loopback', 'uniquelocal'];
  assert.deepEqual(parseConfig(config({}, { listen: { trustProxy: trusted } })).listen.trustProxy, trusted);
  assert.equal(parseConfig(config()).listen.trustProxy, undefined, 'the socket\'s address by default');
  fails(config({}, { listen: { trustProxy: 1 } }), 'listen.trustProxy', /array/i);
  fails(config({}, { listen: { trustProxy: ['10.0.0.0/33'] } }), 'listen.trustProxy[0]', /CIDR/);
  fails(config({}, { listen: { trustProxy: [] } }), 'listen.trustProxy', /at least one/);
});

test('signing keys: RSA (2048+), EC and Ed25519 PEMs, from ${VAR}', () => {
  const keys = [pem('ec'), pem('rsa'), pem('ed25519')];
  const parsed = parseConfig(config({ broker: { signingKeys: ['${KEY_1}', '${KEY_2}', '${KEY_3}'], accessTokenTtl: '5m', refreshTokenTtl: '7d', registration: false } }), { KEY_1: keys[0], KEY_2: keys[1], KEY_3: keys[2] });
  assert.deepEqual(parsed.auth.broker.signingKeys, keys);
  assert.equal(parsed.auth.broker.accessTokenTtl, 300_000);
  assert.equal(parsed.auth.broker.registration, false);
});

test('a key that is no PEM private key, or too weak, is named and not quoted', () => {
  const err = fails(config({ broker: { signingKeys: ['-----BEGIN PRIVATE KEY-----\nnot-really-a-key\n-----END PRIVATE KEY-----'] } }), 'auth.broker.signingKeys[0]', /is not a PEM private key/);
  assert.ok(!err.message.includes('not-really-a-key'));
  fails(config({ broker: { signingKeys: [pem('ec'), pem('rsa', 1024)] } }), 'auth.broker.signingKeys[1]', /RSA of 2048 bits or more/);
  const publicPem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  fails(config({ broker: { signingKeys: [publicPem] } }), 'auth.broker.signingKeys[0]', /private key/);
  fails(config({ broker: { signingKeys: [] } }), 'auth.broker.signingKeys', /at least one key/);
});

test('lifetimes: access tokens 1s..24h, refresh tokens longer than access tokens', () => {
  fails(config({ broker: { accessTokenTtl: '500ms' } }), 'auth.broker.accessTokenTtl', /between 1s and 24h/);
  fails(config({ broker: { accessTokenTtl: '2d' } }), 'auth.broker.accessTokenTtl', /between 1s and 24h/);
  fails(config({ broker: { accessTokenTtl: '1h', refreshTokenTtl: '30m' } }), 'auth.broker.refreshTokenTtl', /longer than accessTokenTtl/);
  fails(config({ broker: { accessTokenTtl: 'soon' } }), 'auth.broker.accessTokenTtl', /not a duration/);
  fails(config({ broker: { refresh: '1d' } }), 'auth.broker', /Unrecognized key/);
});

test('broker mode needs the login client, an absolute audience, shared keys with redis, and no token exchange', () => {
  fails(config({ login: undefined }), 'auth.login', /required with auth.mode broker/);
  fails(config({ audience: 'switchboard' }), 'auth.audience', /absolute URI/);
  fails(config({}, { redis: { url: 'redis://redis:6379' }, secrets: { cookieKey: 'c'.repeat(32), tokenKey: 't'.repeat(32) } }), 'auth.broker.signingKeys', /required with redis/);
  const exchange = { tokenExchange: { clientId: 'switchboard', audience: 'hr-api' } };
  fails({ ...config(), backends: [{ name: 'hr', url: 'https://hr.example.com/mcp', ...exchange }] }, 'backends[0].tokenExchange', /needs auth.mode resource-server/);
  fails(config({ mode: 'proxy' }), 'auth.mode', /resource-server|broker/);
  // With keys shared, several replicas are fine.
  parseConfig(config({ broker: { signingKeys: [pem('ec')] } }, { redis: { url: 'redis://redis:6379' }, secrets: { cookieKey: 'c'.repeat(32), tokenKey: 't'.repeat(32) } }));
});
