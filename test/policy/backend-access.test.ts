/**
 * backends[].access (SPEC §3) as pure rules: scopes, tenants through auth.tenantClaim, and
 * claims — single values, arrays, missing claims, dotted paths — plus the config checks that
 * name the key (`access.tenants` without `auth.tenantClaim`, empty tool patterns).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JWTPayload } from 'jose';
import { userKeyOf, scopesOf, type Principal } from '../../src/auth/principal.js';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';
import type { BackendConfig } from '../../src/config/schema.js';
import { backendAccessDenial, claimValues } from '../../src/policy/backend-access.js';

function principal(claims: JWTPayload): Principal {
  const iss = 'https://idp.example.com';
  const sub = String(claims.sub ?? 'alice');
  return { iss, sub, userKey: userKeyOf(iss, sub), scopes: scopesOf(claims), exp: 2_000_000_000, claims: { iss, sub, ...claims } };
}

function backend(access: Record<string, unknown>, tenantClaim: string | undefined = 'org'): BackendConfig {
  const config = parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp', ...(tenantClaim ? { tenantClaim } : {}) },
    backends: [{ name: 'crm', url: 'http://127.0.0.1:9999/mcp', access }],
  });
  return config.backends[0]!;
}

describe('backendAccessDenial', () => {
  test('an empty access block admits everyone', () => {
    assert.equal(backendAccessDenial(principal({}), backend({}), 'org'), undefined);
  });

  test('every required scope must be granted', () => {
    const b = backend({ scopes: ['crm:read', 'crm:write'] });
    assert.equal(backendAccessDenial(principal({ scope: 'mcp crm:read crm:write' }), b, 'org'), undefined);
    assert.equal(backendAccessDenial(principal({ scp: ['crm:read', 'crm:write'] }), b, 'org'), undefined);
    const denial = backendAccessDenial(principal({ scope: 'crm:read' }), b, 'org');
    assert.equal(denial?.reason, 'scope');
    assert.match(denial!.message, /crm:write/);
    assert.doesNotMatch(denial!.message, /crm:read/, 'only the missing scopes are named');
  });

  test('tenants: a string claim, an array claim (any match), a missing claim', () => {
    const b = backend({ tenants: ['acme', 'globex'] });
    assert.equal(backendAccessDenial(principal({ org: 'acme' }), b, 'org'), undefined);
    assert.equal(backendAccessDenial(principal({ org: ['initech', 'globex'] }), b, 'org'), undefined);
    for (const claims of [{ org: 'initech' }, { org: ['initech'] }, {}, { org: { name: 'acme' } }, { org: null }, { tenant: 'acme' }]) {
      const denial = backendAccessDenial(principal(claims as JWTPayload), b, 'org');
      assert.equal(denial?.reason, 'tenant', JSON.stringify(claims));
      // Neither the allowed tenants nor the caller's own value appear in the message.
      assert.doesNotMatch(denial!.message, /acme|globex|initech/);
    }
  });

  test('tenants without a tenantClaim fail closed', () => {
    assert.equal(backendAccessDenial(principal({ org: 'acme' }), backend({ tenants: ['acme'] }), undefined)?.reason, 'tenant');
  });

  test('numbers and booleans compare by their string form', () => {
    assert.equal(backendAccessDenial(principal({ org: 42 }), backend({ tenants: ['42'] }), 'org'), undefined);
    assert.equal(backendAccessDenial(principal({ admin: true }), backend({ claims: { admin: ['true'] } }), 'org'), undefined);
  });

  test('claims: each entry needs one allowed value; arrays, strings, missing claims', () => {
    const b = backend({ claims: { groups: ['eng', 'ops'], plan: ['enterprise'] } });
    assert.equal(backendAccessDenial(principal({ groups: ['sales', 'ops'], plan: 'enterprise' }), b, 'org'), undefined);
    assert.equal(backendAccessDenial(principal({ groups: 'eng', plan: ['free', 'enterprise'] }), b, 'org'), undefined);
    const wrongGroup = backendAccessDenial(principal({ groups: ['sales'], plan: 'enterprise' }), b, 'org');
    assert.equal(wrongGroup?.reason, 'claim');
    assert.match(wrongGroup!.message, /"groups"/);
    assert.doesNotMatch(wrongGroup!.message, /eng|ops|sales/);
    assert.equal(backendAccessDenial(principal({ groups: ['eng'] }), b, 'org')?.reason, 'claim', 'plan missing');
    // A space-separated string is one value, not a list.
    assert.equal(backendAccessDenial(principal({ groups: 'eng ops', plan: 'enterprise' }), b, 'org')?.reason, 'claim');
  });

  test('the checks run in order scope, tenant, claim', () => {
    const b = backend({ scopes: ['crm'], tenants: ['acme'], claims: { groups: ['eng'] } });
    assert.equal(backendAccessDenial(principal({ org: 'initech' }), b, 'org')?.reason, 'scope');
    assert.equal(backendAccessDenial(principal({ scope: 'crm', org: 'initech', groups: 'eng' }), b, 'org')?.reason, 'tenant');
    assert.equal(backendAccessDenial(principal({ scope: 'crm', org: 'acme' }), b, 'org')?.reason, 'claim');
    assert.equal(backendAccessDenial(principal({ scope: 'crm', org: 'acme', groups: ['eng'] }), b, 'org'), undefined);
  });
});

describe('claimValues', () => {
  test('a top-level key wins over a dotted path (namespaced claims contain dots)', () => {
    const claims = { 'https://acme.example/groups': ['eng'], https: { 'acme': 'no' } };
    assert.deepEqual(claimValues(claims, 'https://acme.example/groups'), ['eng']);
  });

  test('dotted names read nested objects when there is no such top-level key', () => {
    const claims = { realm_access: { roles: ['admin', 'user'] }, 'a.b': 'flat', a: { b: 'nested' } };
    assert.deepEqual(claimValues(claims, 'realm_access.roles'), ['admin', 'user']);
    assert.deepEqual(claimValues(claims, 'a.b'), ['flat']);
    assert.deepEqual(claimValues(claims, 'realm_access.missing'), []);
    assert.deepEqual(claimValues(claims, 'realm_access.roles.0'), [], 'arrays are not indexed into');
  });

  test('a tenant from a nested claim', () => {
    const b = backend({ tenants: ['acme'] }, 'org.id');
    assert.equal(backendAccessDenial(principal({ org: { id: 'acme' } }), b, 'org.id'), undefined);
  });

  test('inherited properties are not claims', () => {
    assert.deepEqual(claimValues({}, 'constructor'), []);
    assert.deepEqual(claimValues({ a: {} }, 'a.toString'), []);
  });
});

describe('access config', () => {
  const base = { publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' } };

  function configError(raw: unknown): ConfigError {
    try {
      parseConfig(raw);
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err;
    }
    assert.fail('config was accepted');
  }

  test('access.tenants requires auth.tenantClaim, and the error names the key', () => {
    const err = configError({ ...base, backends: [{ name: 'a', url: 'http://127.0.0.1:1/mcp' }, { name: 'b', url: 'http://127.0.0.1:2/mcp', access: { tenants: ['acme'] } }] });
    assert.equal(err.key, 'backends[1].access.tenants');
    assert.match(err.message, /auth\.tenantClaim/);
    // With the claim configured the same backend is fine.
    parseConfig({ ...base, auth: { ...base.auth, tenantClaim: 'org' }, backends: [{ name: 'b', url: 'http://127.0.0.1:2/mcp', access: { tenants: ['acme'] } }] });
  });

  test('tool patterns must be non-empty strings; unknown keys are refused', () => {
    assert.equal(configError({ ...base, backends: [{ name: 'a', url: 'http://127.0.0.1:1/mcp', access: { tools: { deny: [''] } } }] }).key, 'backends[0].access.tools.deny[0]');
    assert.equal(configError({ ...base, backends: [{ name: 'a', url: 'http://127.0.0.1:1/mcp', access: { tools: { hide: ['x'] } } }] }).key, 'backends[0].access.tools');
    assert.equal(configError({ ...base, backends: [{ name: 'a', url: 'http://127.0.0.1:1/mcp', access: { tools: { allow: 'echo' } } }] }).key, 'backends[0].access.tools.allow');
  });
});
