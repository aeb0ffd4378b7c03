/**
 * The approvals of `confirm` rules in a real Redis (issue 46 §4), as two replicas see them (two
 * store connections, one Redis): an approval is found only under its caller's key; bound to
 * backend, tool, argument hash (member order aside) and policy version; decided once when two
 * decisions race; used once when two retries race; gone after its ttl. Four-eyes requests
 * (approvers): in their rule's queue, found there by an approver (and by them again once
 * decided), listed until decided; the caller's open list; an expiry told once over two replicas;
 * the bounds: 50 open requests per caller, 500 pending per four-eyes rule.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { userKeyOf, type Principal } from '../../src/auth/principal.js';
import { MAX_OPEN_PER_USER, MAX_QUEUE_PER_RULE } from '../../src/policy/approval-index.js';
import { ApprovalStore, type ApprovalEvents, type HeldCall } from '../../src/policy/approvals.js';
import { RedisStore } from '../../src/state/redis-store.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let redis: RedisHandle;
const stores: RedisStore[] = [];

before(async () => {
  redis = await startRedis();
});

after(async () => {
  await Promise.allSettled(stores.map((s) => s.close()));
  await redis?.stop();
});

/** Two replicas' views of one Redis under one prefix. */
async function replicas(events: [ApprovalEvents?, ApprovalEvents?] = []): Promise<[ApprovalStore, ApprovalStore]> {
  const keyPrefix = `approvals-${randomUUID()}:`;
  const made = [new RedisStore({ url: redis.url, keyPrefix }), new RedisStore({ url: redis.url, keyPrefix })];
  for (const store of made) {
    await store.ready(10_000);
    stores.push(store);
  }
  return [new ApprovalStore(made[0]!, events[0]), new ApprovalStore(made[1]!, events[1])];
}

const principal = (sub: string): Principal => ({ iss: 'https://idp.example', sub, userKey: userKeyOf('https://idp.example', sub), scopes: new Set(), exp: 0, claims: {} });
const alice = principal('alice');
/** The caller deciding their own request. */
const ALICE = { userKey: alice.userKey, label: 'Alice' };
const CALL: HeldCall = { backend: 'bank', tool: 'transfer', arguments: { amount: 5000, to: 'bob' }, policyVersion: 'v1', rule: 'big-transfers', ttlMs: 60_000 };

describe('approvals in Redis', () => {
  test('found by its caller only, and bound to the call', async () => {
    const [a, b] = await replicas();
    const held = (await a.hold(alice, CALL))!;
    assert.equal((await b.get(alice.userKey, held.id))?.status, 'pending');
    assert.equal(await b.get(principal('mallory').userKey, held.id), undefined, 'another user finds nothing');
    assert.equal((await b.forCall(alice, { ...CALL, arguments: { to: 'bob', amount: 5000 } }))?.id, held.id, 'member order does not matter');
    assert.equal(await b.forCall(alice, { ...CALL, arguments: { amount: 5001, to: 'bob' } }), undefined);
    assert.equal(await b.forCall(alice, { ...CALL, policyVersion: 'v2' }), undefined);
    assert.equal(await b.forCall(alice, { ...CALL, tool: 'other' }), undefined);
    assert.equal(await b.forCall(principal('mallory'), CALL), undefined);
    assert.equal((await b.hold(alice, CALL))?.id, held.id, 'a second hold of the same call finds the first');
  });

  test('two decisions at once: one is taken', async () => {
    const [a, b] = await replicas();
    const held = (await a.hold(alice, CALL))!;
    const [approved, denied] = await Promise.all([a.decide(held, 'approved', ALICE), b.decide(held, 'denied', ALICE)]);
    assert.equal([approved, denied].filter(Boolean).length, 1);
    const status = (await a.get(alice.userKey, held.id))!.status;
    assert.equal(status, (approved ?? denied)!.status);
  });

  test('two retries at once: one uses the approval', async () => {
    const [a, b] = await replicas();
    const held = (await a.hold(alice, CALL))!;
    await a.decide(held, 'approved', ALICE);
    const [seenA, seenB] = await Promise.all([a.forCall(alice, CALL), b.forCall(alice, CALL)]);
    const used = await Promise.all([a.use(seenA!, CALL), b.use(seenB!, CALL)]);
    assert.deepEqual(used.sort(), [false, true]);
    assert.equal((await a.get(alice.userKey, held.id))!.status, 'used');
    assert.equal(await b.forCall(alice, CALL), undefined, 'the next call needs a new approval');
    assert.equal(await a.decide((await a.get(alice.userKey, held.id))!, 'approved', ALICE), undefined, 'a used approval is not decided again');
  });

  test('gone after its ttl', async () => {
    const [a, b] = await replicas();
    const held = (await a.hold(alice, { ...CALL, ttlMs: 300 }))!;
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(await b.get(alice.userKey, held.id), undefined);
    assert.equal(await b.forCall(alice, CALL), undefined);
    assert.equal(await b.decide(held, 'approved', ALICE), undefined);
  });

  test('four-eyes: queued for its rule, found by an approver, out of the queue once decided', async () => {
    const [a, b] = await replicas();
    const fourEyes = { ...CALL, rule: 'four-eyes', approvers: { groups: ['finance'] } };
    const held = (await a.hold({ ...alice, claims: { name: 'Alice Example' } }, fourEyes))!;
    assert.equal(held.callerLabel, 'Alice Example');
    const bob = principal('bob');
    assert.equal(await b.get(bob.userKey, held.id), undefined, 'not under the approver\'s key');
    assert.equal(await b.forApprover(bob.userKey, held.id, ['big-transfers']), undefined, 'not in the queue of another rule');
    assert.equal((await b.forApprover(bob.userKey, held.id, ['four-eyes']))?.id, held.id);
    assert.deepEqual((await b.index.queued('four-eyes')).map((e) => [e.id, e.callerLabel]), [[held.id, 'Alice Example']]);
    assert.deepEqual((await b.index.open(alice.userKey)).map((e) => e.id), [held.id], 'in the caller\'s open list');
    const decided = await b.decide(held, 'approved', { userKey: bob.userKey, label: 'Bob' });
    assert.equal(decided?.decidedBy?.label, 'Bob');
    assert.deepEqual(await a.index.queued('four-eyes'), [], 'decided: no longer queued');
    assert.equal((await a.forApprover(bob.userKey, held.id, []))?.status, 'approved', 'the approver finds what they decided');
    assert.deepEqual((await a.index.open(alice.userKey)).map((e) => e.id), [held.id], 'approved and unused: still open');
    assert.equal(await a.use((await a.forCall(alice, fourEyes))!, fourEyes), true);
    assert.deepEqual(await a.index.open(alice.userKey), [], 'used: closed');
  });

  test('at most 50 open requests per caller, and 500 pending per four-eyes rule', async () => {
    const [a, b] = await replicas();
    const calls = (n: number, extra: Partial<HeldCall> = {}) => Array.from({ length: n }, (_, i) => ({ ...CALL, ...extra, arguments: { amount: 1000 + i, to: 'bob' } }));
    for (const call of calls(MAX_OPEN_PER_USER)) assert.ok(await a.hold(alice, call));
    assert.equal(await b.hold(alice, { ...CALL, arguments: { amount: 1, to: 'bob' } }), undefined, 'the 51st open request is refused');
    assert.ok(await b.hold(principal('carol'), CALL), 'another caller has room');
    // A decision that closes one (a denial) makes room again.
    const first = (await a.forCall(alice, calls(1)[0]!))!;
    await a.decide(first, 'denied', ALICE);
    assert.ok(await b.hold(alice, { ...CALL, arguments: { amount: 1, to: 'bob' } }), 'room again once one is closed');

    // Four-eyes: 500 pending over all callers (10 callers of 50 each), then the rule's queue is full.
    const fourEyes = { rule: 'four-eyes', approvers: { groups: ['finance'] } };
    for (let caller = 0; caller < MAX_QUEUE_PER_RULE / MAX_OPEN_PER_USER; caller++) {
      const who = principal(`queued-${caller}`);
      await Promise.all(calls(MAX_OPEN_PER_USER, fourEyes).map(async (call) => assert.ok(await (caller % 2 ? a : b).hold(who, call))));
    }
    assert.equal((await a.index.queued('four-eyes')).length, MAX_QUEUE_PER_RULE);
    assert.equal(await a.hold(principal('dave'), { ...CALL, ...fourEyes }), undefined, 'the 501st pending request of the rule is refused');
    assert.ok(await a.hold(principal('dave'), { ...CALL, rule: 'other-four-eyes', approvers: { groups: ['finance'] } }), 'another rule has its own queue');
    assert.ok(await a.hold(principal('dave'), CALL), 'a rule without approvers has no queue to fill');
  });

  test('an expiry is told once, whichever replica notices', async () => {
    const expired: string[] = [];
    const events: ApprovalEvents = { requested: () => undefined, decided: () => undefined, used: () => undefined, expired: (e) => expired.push(e.id) };
    const [a, b] = await replicas([events, events]);
    const held = (await a.hold(alice, { ...CALL, rule: 'four-eyes', approvers: { groups: ['finance'] }, ttlMs: 300 }))!;
    await new Promise((resolve) => setTimeout(resolve, 600));
    await Promise.all([a.index.queued('four-eyes'), b.index.open(alice.userKey), a.index.open(alice.userKey)]);
    assert.deepEqual(expired, [held.id]);
    assert.deepEqual(await b.index.queued('four-eyes'), []);
  });
});
