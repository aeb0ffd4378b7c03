/**
 * The claims a broker token carries for access policies (src/broker/grant-claims.ts): only
 * `auth.tenantClaim` and the names `backends[].access.claims` reads (the top-level member of
 * a path), never the broker's own claims, bounded in size, kept per grant in the store.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createGrantClaims, pickClaims, policyClaimNames } from '../../src/broker/grant-claims.js';
import { parseConfig } from '../../src/config/load.js';
import { MemoryStore } from '../../src/state/memory-store.js';

const config = parseConfig({
  publicUrl: 'https://mcp.example.com',
  auth: { issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp', tenantClaim: 'tid' },
  backends: [
    { name: 'hr', url: 'https://hr.example.com/mcp', access: { tenants: ['acme'], claims: { 'realm_access.roles': ['hr'], groups: ['eng'], sub: ['x'] } } },
  ],
});

test('the policy claims: the tenant claim, the backends\' claims and the top of a path; not the broker\'s own', () => {
  assert.deepEqual(policyClaimNames(config).sort(), ['groups', 'realm_access', 'realm_access.roles', 'tid']);
});

test('only those are carried, and nothing when they are too large', () => {
  const names = policyClaimNames(config);
  const claims = { tid: 'acme', groups: ['eng'], realm_access: { roles: ['hr'] }, email: 'a@example.com', name: 'A' };
  assert.deepEqual(pickClaims(claims, names), { tid: 'acme', groups: ['eng'], realm_access: { roles: ['hr'] } });
  assert.deepEqual(pickClaims({ groups: Array.from({ length: 2000 }, (_, i) => `group-${i}`) }, names), {});
  assert.deepEqual(pickClaims(undefined, names), {});
});

test('kept per grant in the store', async () => {
  const store = new MemoryStore();
  const grants = createGrantClaims(store);
  await grants.save('g1', { tid: 'acme' }, 60_000);
  assert.deepEqual(await grants.load('g1'), { tid: 'acme' });
  assert.deepEqual(await grants.load('g2'), {});
  await store.close();
});
