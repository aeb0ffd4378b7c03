/**
 * `effect: confirm` in `policy.rules` without a gateway (issue 46 §1): its `ttl` (default 10m)
 * and `approvers` read and checked, refused on other effects; `auth.login` required; a confirm rule judges
 * `tools/call` only, holds a call whose expression fails (fail closed), lists its tool, and
 * the policy version changes with any rule.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendCaller } from '../../src/backends/backend.js';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { CelRules } from '../../src/policy/cel-rules.js';
import { policyVariables } from '../../src/policy/policy-input.js';

function config(policy: ConfigInput['policy'], login = true) {
  return parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp', ...(login ? { login: { clientId: 'switchboard-web' } } : {}) },
    backends: [{ name: 'bank', url: 'http://127.0.0.1:9999/mcp' }],
    policy,
  });
}

const BIG = { name: 'big-transfers', effect: 'confirm' as const, when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount >= 1000' };
const caller: BackendCaller = { principal: { iss: 'i', sub: 's', userKey: 'k'.repeat(32), scopes: new Set(), exp: 0, claims: {} }, log: undefined as never, headers: {}, address: '192.0.2.7', url: '/mcp/bank' };
const call = (tool: string, args?: unknown) => policyVariables(caller, { method: 'tools/call', backend: 'bank', tool, arguments: args });

describe('confirm in the config', () => {
  test('ttl defaults to 10m and takes a duration; approvers are claims with values', () => {
    const [rule] = config({ rules: [BIG] }).policy.rules;
    assert.equal(rule!.ttl, 600_000);
    const [timed] = config({ rules: [{ ...BIG, ttl: '2m', approvers: { claims: { groups: ['finance-approvers'] } } }] }).policy.rules;
    assert.equal(timed!.ttl, 120_000);
    assert.deepEqual(timed!.approvers, { claims: { groups: ['finance-approvers'] } });
  });

  test('ttl and approvers are refused on allow and deny, and when malformed', () => {
    assert.throws(() => config({ rules: [{ name: 'd', effect: 'deny', when: 'true', ttl: '5m' }] }), /policy\.rules\[0\]\.ttl: is for effect confirm only/);
    assert.throws(() => config({ rules: [{ name: 'a', effect: 'allow', when: 'true', approvers: { claims: { g: ['x'] } } }] }), /policy\.rules\[0\]\.approvers: is for effect confirm only/);
    assert.throws(() => config({ rules: [{ ...BIG, ttl: '1s' }] }), /ttl.*between 10s and 24h/);
    assert.throws(() => config({ rules: [{ ...BIG, ttl: 'soon' }] }), /ttl.*between 10s and 24h/);
    assert.throws(() => config({ rules: [{ ...BIG, approvers: { claims: {} } }] }), /approvers\.claims: must name at least one claim/);
    assert.throws(() => config({ rules: [{ ...BIG, approvers: { claims: { groups: [] } } }] }), /must list at least one value/);
    assert.throws(() => config({ rules: [{ ...BIG, approvers: { groups: ['x'] } as never }] }), /approvers/);
  });

  test('a confirm rule needs the browser sign-in: the caller approves on a signed-in page', () => {
    assert.throws(() => config({ rules: [BIG] }, false), /auth\.login: is required when a policy rule has effect confirm/);
    assert.doesNotThrow(() => config({ rules: [{ name: 'd', effect: 'deny', when: 'true' }] }, false));
  });
});

describe('confirm in CelRules', () => {
  const rules = new CelRules(config({ rules: [BIG] }).policy);

  test('a matching call is confirm with its terms; others fall to the default', () => {
    assert.deepEqual(rules.decide(call('transfer', { amount: 5000 })), { effect: 'confirm', rule: 'big-transfers', confirm: { ttlMs: 600_000 } });
    assert.deepEqual(rules.decide(call('transfer', { amount: 5 })), { effect: 'allow', rule: 'policy.default' });
  });

  test('a call the expression fails on is held (fail closed); other methods pass the rule over', () => {
    assert.equal(rules.decide(call('transfer', { to: 'x' })).effect, 'confirm');
    const onlyTransfer = new CelRules(config({ rules: [{ name: 'all', effect: 'confirm', when: 'mcp.tool.arguments.amount > 0' }] }).policy);
    assert.equal(onlyTransfer.decide(policyVariables(caller, { method: 'resources/read', backend: 'bank', uri: 'x://y' })).effect, 'allow');
    assert.equal(onlyTransfer.decide(policyVariables(caller, { method: 'prompts/get', backend: 'bank', prompt: 'p' })).effect, 'allow');
  });

  test('the tool is listed: a call it matches can go through once approved', () => {
    const strict = new CelRules(config({ default: 'deny', rules: [BIG] }).policy);
    assert.equal(strict.couldAllow(policyVariables(caller, { method: 'tools/call', backend: 'bank', tool: 'transfer' }, 'arguments')), true);
    assert.equal(strict.couldAllow(policyVariables(caller, { method: 'tools/call', backend: 'bank', tool: 'other' }, 'arguments')), false);
  });

  test('the policy version is stable for one policy and changes with any rule', () => {
    assert.equal(rules.version, new CelRules(config({ rules: [BIG] }).policy).version);
    assert.notEqual(rules.version, new CelRules(config({ rules: [{ ...BIG, ttl: '5m' }] }).policy).version);
    assert.notEqual(rules.version, new CelRules(config({ rules: [{ ...BIG, when: 'true' }] }).policy).version);
  });
});
