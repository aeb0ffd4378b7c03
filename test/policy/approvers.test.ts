/**
 * Who may decide a four-eyes request (src/policy/approvers.ts, issue 46 §1): every claim the
 * rule names must hold one of its values (list claims by any entry, nested paths), never the
 * caller whatever their claims; the rules a viewer may read the queues of; display names.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { approverRules, approversMatch, describeApprovers, displayName, mayApprove } from '../../src/policy/approvers.js';

const FINANCE = { groups: ['finance-approvers', 'treasury'] };

describe('four-eyes approvers', () => {
  test('claims match by any listed value, every claim named, nested paths too', () => {
    assert.equal(approversMatch(FINANCE, { groups: ['sales', 'treasury'] }), true);
    assert.equal(approversMatch(FINANCE, { groups: 'finance-approvers' }), true);
    assert.equal(approversMatch(FINANCE, { groups: ['sales'] }), false);
    assert.equal(approversMatch(FINANCE, {}), false);
    assert.equal(approversMatch(FINANCE, undefined), false, 'no claims kept: no approver');
    const both = { groups: ['finance-approvers'], department: ['finance'] };
    assert.equal(approversMatch(both, { groups: ['finance-approvers'] }), false, 'every claim the rule names');
    assert.equal(approversMatch(both, { groups: ['finance-approvers'], department: 'finance' }), true);
    assert.equal(approversMatch({ 'realm_access.roles': ['approver'] }, { realm_access: { roles: ['approver'] } }), true);
  });

  test('never the caller, whatever their claims', () => {
    const caller = { iss: 'https://idp', sub: 'alice', userKey: 'k-alice' };
    assert.equal(mayApprove(FINANCE, caller, { ...caller, claims: { groups: ['treasury'] } }), false);
    assert.equal(mayApprove(FINANCE, caller, { iss: 'https://idp', sub: 'alice', userKey: 'other', claims: { groups: ['treasury'] } }), false, 'same iss and sub');
    assert.equal(mayApprove(FINANCE, caller, { iss: 'https://idp', sub: 'bob', userKey: 'k-bob', claims: { groups: ['treasury'] } }), true);
    assert.equal(mayApprove(FINANCE, caller, { iss: 'https://idp', sub: 'bob', userKey: 'k-bob', claims: { groups: ['sales'] } }), false);
  });

  test('the queues a viewer may read, and how the pages name people and approvers', () => {
    const rules = [
      { name: 'self', effect: 'confirm' },
      { name: 'finance', effect: 'confirm', approvers: { claims: FINANCE } },
      { name: 'ops', effect: 'confirm', approvers: { claims: { groups: ['ops'] } } },
      { name: 'allowed', effect: 'allow' },
    ];
    assert.deepEqual(approverRules(rules, { groups: ['treasury', 'ops'] }), ['finance', 'ops']);
    assert.deepEqual(approverRules(rules, { groups: ['sales'] }), []);
    assert.equal(describeApprovers({ groups: ['a', 'b'], department: ['finance'] }), 'groups: a or b; department: finance');
    assert.equal(displayName({ name: ' Alice Example ' }, 'alice'), 'Alice Example');
    assert.equal(displayName({ email: 'a@example.com' }, 'alice'), 'a@example.com');
    assert.equal(displayName({}, 'alice'), 'alice');
  });
});
