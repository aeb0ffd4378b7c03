/**
 * A rule that reads only the token's claims runs once per claims object (src/policy/cel-rules.ts
 * `valueOf`, issue 44 part 1): the same object gives the kept value, another user's claims run
 * the rule again, and a rule that names any other variable runs for every request. What each
 * user gets is checked over many interleavings; how often a rule ran, by a claim read through a
 * counting getter.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendCaller } from '../../src/backends/backend.js';
import { CelRules } from '../../src/policy/cel-rules.js';
import { policyVariables } from '../../src/policy/policy-input.js';

const RULES = [
  { name: 'group-only', effect: 'deny' as const, when: '!("bench" in jwt.groups)' },
  { name: 'no-long-echo', effect: 'deny' as const, when: 'mcp.tool.name == "echo" && size(mcp.tool.arguments.message) > 10' },
  { name: 'allow-rest', effect: 'allow' as const, when: 'true' },
];

function rules(list = RULES): CelRules {
  return new CelRules({ default: 'deny', rules: list } as unknown as ConstructorParameters<typeof CelRules>[0]);
}

function caller(claims: Record<string, unknown>): BackendCaller {
  return { principal: { iss: 'i', sub: 's', userKey: 'k'.repeat(32), scopes: new Set(), exp: 0, claims }, log: undefined as never, headers: {}, address: '192.0.2.7', url: '/mcp/b' };
}

const call = (claims: Record<string, unknown>, message = 'hi') => policyVariables(caller(claims), { method: 'tools/call', backend: 'b', tool: 'echo', arguments: { message } });

/** Claims whose `groups` counts its reads: a read is a run of a rule that names it. */
function counted(groups: string[]): { claims: Record<string, unknown>; reads: () => number } {
  let reads = 0;
  const claims = {};
  Object.defineProperty(claims, 'groups', { enumerable: true, get: () => (reads++, groups) });
  return { claims, reads: () => reads };
}

test('users interleaved: each gets the decision of their own claims, whatever came before', () => {
  const policy = rules();
  const alice = Object.freeze({ sub: 'alice', groups: Object.freeze(['bench']) });
  const bob = Object.freeze({ sub: 'bob', groups: Object.freeze(['other']) });
  const carol = Object.freeze({ sub: 'carol' }); // no groups: the rule fails, and a failing deny matches
  let seed = 7;
  for (let n = 0; n < 500; n++) {
    seed = (seed * 1_103_515_245 + 12_345) >>> 0;
    const who = [alice, bob, carol][seed % 3]!;
    const long = seed % 5 === 0;
    const decision = policy.decide(call(who, long ? 'x'.repeat(20) : 'hi'));
    const expected = who === alice ? (long ? 'no-long-echo' : 'allow-rest') : 'group-only';
    assert.equal(decision.rule, expected, `call ${n} by ${who.sub}`);
  }
});

test('a rule on the claims alone runs once for the same claims object, again for another', () => {
  const policy = rules();
  const first = counted(['bench']);
  for (let n = 0; n < 5; n++) assert.equal(policy.decide(call(first.claims)).rule, 'allow-rest');
  assert.equal(first.reads(), 1, 'one run for five calls of one token');
  const second = counted(['bench']);
  policy.decide(call(second.claims));
  policy.decide(call(first.claims));
  assert.equal(second.reads(), 1);
  assert.equal(first.reads(), 2, 'after another token, the first runs again (one pair kept per rule)');
  // Listing reads the same rule the same way.
  assert.equal(policy.couldAllow(policyVariables(caller(first.claims), { method: 'tools/call', backend: 'b', tool: 'echo' }, 'arguments')), true);
  assert.equal(first.reads(), 2);
});

test('a rule that names another variable runs for every request, even where it also reads the claims', () => {
  const policy = rules([
    { name: 'mixed', effect: 'deny' as const, when: '!("bench" in jwt.groups) && mcp.tool.name == "echo"' },
    { name: 'quoted', effect: 'deny' as const, when: '"source" in jwt.groups' },
    { name: 'allow-rest', effect: 'allow' as const, when: 'true' },
  ]);
  const user = counted(['bench']);
  for (let n = 0; n < 4; n++) assert.equal(policy.decide(call(user.claims)).rule, 'allow-rest');
  // `mixed` reads groups each time; `quoted` names a variable only inside a string, and runs each time too (the word test errs that way).
  assert.equal(user.reads(), 8);
});
