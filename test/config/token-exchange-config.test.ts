/**
 * `backends[].tokenExchange` (SPEC §8): what a working configuration looks like, and the
 * errors, each naming the key, for the ones that cannot work.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

const exchange = { clientId: 'switchboard', clientSecret: 'secret', audience: 'hr-api' };

function config(backend: Record<string, unknown>, more: Record<string, unknown> = {}): Record<string, unknown> {
  return { publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' }, backends: [{ name: 'hr', url: 'https://hr.example.com/mcp', ...backend }], ...more };
}

function fails(input: Record<string, unknown>, key: string, problem: RegExp): void {
  assert.throws(
    () => parseConfig(input),
    (err: unknown) => err instanceof ConfigError && err.key === key && problem.test(err.message),
  );
}

test('RFC 8693 and entra-obo configurations parse; tokenUrl may be left to the issuer\'s metadata', () => {
  const parsed = parseConfig(config({ tokenExchange: { ...exchange, resource: 'https://hr.example.com/mcp', scopes: ['hr.read'] } }));
  assert.deepEqual(parsed.backends[0]!.tokenExchange, { ...exchange, resource: 'https://hr.example.com/mcp', scopes: ['hr.read'] });
  const obo = parseConfig(config({ tokenExchange: { tokenUrl: 'https://login.microsoftonline.com/t/oauth2/v2.0/token', clientId: 'id', clientSecret: 's', scopes: ['api://hr/.default'], preset: 'entra-obo' } }));
  assert.equal(obo.backends[0]!.tokenExchange!.preset, 'entra-obo');
});

test('an exchange needs a target, a client and, for entra-obo, no resource or audience but scopes and a secret', () => {
  fails(config({ tokenExchange: { clientId: 'switchboard' } }), 'backends[0].tokenExchange.audience', /needs a target/);
  fails(config({ tokenExchange: { audience: 'hr-api' } }), 'backends[0].tokenExchange.clientId', /Required/);
  fails(config({ tokenExchange: { ...exchange, preset: 'okta' } }), 'backends[0].tokenExchange.preset', /entra-obo/);
  const obo = { clientId: 'id', clientSecret: 's', scopes: ['api://hr/.default'], preset: 'entra-obo' };
  fails(config({ tokenExchange: { ...obo, resource: 'https://hr.example.com' } }), 'backends[0].tokenExchange.resource', /not used by the Entra on-behalf-of flow/);
  fails(config({ tokenExchange: { ...obo, audience: 'hr' } }), 'backends[0].tokenExchange.audience', /not used by the Entra on-behalf-of flow/);
  fails(config({ tokenExchange: { ...obo, scopes: [] } }), 'backends[0].tokenExchange.scopes', /required with preset entra-obo/);
  fails(config({ tokenExchange: { ...obo, clientSecret: undefined } }), 'backends[0].tokenExchange.clientSecret', /confidential client/);
  fails(config({ tokenExchange: { ...exchange, tokenUrl: 'ftp://idp' } }), 'backends[0].tokenExchange.tokenUrl', /http/);
});

test('tokenExchange with upstreamAuth, or on a bridged transport, is an error', () => {
  const upstreamAuth = { provider: 'acme', authorizationUrl: 'https://acme.example.com/authorize', tokenUrl: 'https://acme.example.com/token', clientId: 'c' };
  fails(config({ tokenExchange: exchange, upstreamAuth }, { auth: { issuer: 'https://idp.example.com', audience: 'a', login: { clientId: 'web' } } }), 'backends[0].tokenExchange', /cannot be combined with upstreamAuth/);
  fails(config({ url: undefined, transport: 'stdio', command: 'server', tokenExchange: exchange }), 'backends[0].tokenExchange', /needs transport streamable-http/);
});

test('with redis, the key that seals the shared cache is required', () => {
  const redis = { redis: { url: 'redis://127.0.0.1:6379' } };
  fails(config({ tokenExchange: exchange }, redis), 'secrets.tokenKey', /tokenExchange/);
  const sealed = parseConfig(config({ tokenExchange: exchange }, { ...redis, secrets: { tokenKey: 'k'.repeat(32) } }));
  assert.equal(sealed.secrets.tokenKey, 'k'.repeat(32), 'the key given is the key used');
  assert.equal(sealed.redis?.url, 'redis://127.0.0.1:6379');
  assert.deepEqual(sealed.backends[0]!.tokenExchange, { ...exchange, scopes: [] });
  // Without redis the exchanged tokens stay in one process: no key is asked for.
  const alone = parseConfig(config({ tokenExchange: exchange }));
  assert.equal(alone.redis, undefined);
  assert.equal(alone.secrets.tokenKey, undefined);
  assert.deepEqual(alone.backends[0]!.tokenExchange, { ...exchange, scopes: [] });
});
