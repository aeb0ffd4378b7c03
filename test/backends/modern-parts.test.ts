/**
 * The parts of the 2026-07-28 adapter for 2025-11-25 clients (src/backends/modern/), each on its
 * own: the `initialize` result made from a DiscoverResult, and the answers to the gateway's own
 * requests finding the round that waits for them, here or on another replica (the two
 * replicas' coordinators are joined directly: what crosses is exactly what `send` carries).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InputAnswers } from '../../src/backends/modern/input-answers.js';
import { initializeFromDiscover } from '../../src/backends/modern/initialize-from-discover.js';
import type { ReplicaMessage } from '../../src/state/coordinator.js';

const DISCOVER = {
  resultType: 'complete',
  supportedVersions: ['2026-07-28'],
  capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, logging: {}, experimental: { x: {} } },
  instructions: 'Be brief.',
  _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'modern-server', version: '3.1.0' } },
};

describe('initializeFromDiscover', () => {
  test('the client keeps its revision when served, else gets the latest; identity and instructions carried', () => {
    assert.equal(initializeFromDiscover(DISCOVER, '2025-06-18', 'b').protocolVersion, '2025-06-18');
    assert.equal(initializeFromDiscover(DISCOVER, '2031-01-01', 'b').protocolVersion, '2025-11-25');
    const result = initializeFromDiscover(DISCOVER, '2025-11-25', 'b');
    assert.deepEqual(result.serverInfo, { name: 'modern-server', version: '3.1.0' });
    assert.equal(result.instructions, 'Be brief.');
    assert.deepEqual(initializeFromDiscover({ capabilities: {} }, '2025-11-25', 'fallback').serverInfo, { name: 'fallback', version: '0.0.0' });
  });

  test('the capabilities are the backend\'s: list changes and subscriptions reach the client on its GET stream', () => {
    assert.deepEqual(initializeFromDiscover(DISCOVER, '2025-11-25', 'b').capabilities, DISCOVER.capabilities);
  });
});

/** Two replicas whose coordinators deliver to each other. */
function twoReplicas(): [InputAnswers, InputAnswers, ReplicaMessage[]] {
  const crossed: ReplicaMessage[] = [];
  const replicas: Record<string, InputAnswers> = {};
  const coordinator = (replicaId: string) => ({
    replicaId,
    send: async (to: string, message: ReplicaMessage) => {
      crossed.push(message);
      if (message.type === 'input-answer') replicas[to]!.receive(JSON.parse(message.message) as Record<string, unknown>, message);
    },
  });
  replicas.a = new InputAnswers(coordinator('a'));
  replicas.b = new InputAnswers(coordinator('b'));
  return [replicas.a, replicas.b, crossed];
}

const ALICE = { sessionId: 'sb26-alice.one', userKey: 'alice' };

describe('InputAnswers', () => {
  test('the answers to one round, each landing on either replica, resolve it by key once all are in', async () => {
    const [a, b, crossed] = twoReplicas();
    const round = a.open(['user_name', 'client_roots'], ALICE);
    const [nameId, rootsId] = [round.ids.get('user_name')!, round.ids.get('client_roots')!];
    assert.ok(InputAnswers.isOurs(nameId) && InputAnswers.isOurs(rootsId));
    assert.equal(InputAnswers.isOurs(7), false);
    await a.deliver({ jsonrpc: '2.0', id: nameId, result: { action: 'accept', content: { name: 'Ada' } } }, ALICE);
    await b.deliver({ jsonrpc: '2.0', id: rootsId, result: { roots: [] } }, ALICE);
    assert.deepEqual(await round.answers, { user_name: { action: 'accept', content: { name: 'Ada' } }, client_roots: { roots: [] } });
    assert.equal(crossed.length, 1, 'only the answer that landed on the other replica crossed');
  });

  test('an error answer fails the round; a late answer after it closed is dropped', async () => {
    const [a] = twoReplicas();
    const round = a.open(['ask'], ALICE);
    await a.deliver({ jsonrpc: '2.0', id: round.ids.get('ask'), error: { code: -32601, message: 'not supported' } }, ALICE);
    await assert.rejects(round.answers, /the client refused the request: not supported/);
    a.receive({ jsonrpc: '2.0', id: round.ids.get('ask'), result: {} }, ALICE);
  });

  test('a round nobody answers times out; closing one ends its wait', async () => {
    const [a] = twoReplicas();
    // The round's timer does not hold a process open (a gateway's server does); this test's does.
    const alive = setTimeout(() => {}, 1_000);
    await assert.rejects(a.open(['ask'], ALICE, 20).answers, /did not answer in time/);
    clearTimeout(alive);
    const closed = a.open(['ask'], ALICE);
    closed.close();
    await assert.rejects(closed.answers, /the call ended/);
  });
});
