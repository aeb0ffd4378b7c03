/**
 * The bridge's parked calls in one replica's memory (src/stateless/parked-calls.ts): taken once,
 * by their user only; given up when nobody comes back in time or the gateway stops, with the
 * backend's waiting requests answered (an error its handler can end on) and the backend's
 * connection closed. The call here is a real BackendMessages over a body that records being
 * destroyed; what the backend is sent is recorded as the bridge would post it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { syntheticBody } from '../../src/backends/body.js';
import { BackendMessages, type BackendMessage } from '../../src/backends/backend-messages.js';
import type { BridgedCall } from '../../src/stateless/bridged-call.js';
import type { PendingAsk } from '../../src/stateless/input-requests.js';
import { ParkedCalls } from '../../src/stateless/parked-calls.js';

function parkedCall(userKey: string): { call: BridgedCall; sent: BackendMessage[]; destroyed: () => boolean } {
  const body = syntheticBody('event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n');
  let destroyed = false;
  const destroy = body.destroy.bind(body);
  body.destroy = () => {
    destroyed = true;
    destroy();
  };
  const sent: BackendMessage[] = [];
  const call: BridgedCall = {
    messages: new BackendMessages(body, 'text/event-stream'),
    userKey,
    endpoint: 'a',
    method: 'tools/call',
    shared: false,
    clientCapabilities: { elicitation: {} },
    respond: async (message) => {
      sent.push(message);
    },
  };
  return { call, sent, destroyed: () => destroyed };
}

const ask: PendingAsk = { key: 'elicitation-7', backendId: 7, method: 'elicitation/create', params: { message: 'Name?' } };

const until = async (what: string, check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(check(), what);
};

describe('ParkedCalls', () => {
  test('a call is taken once, by its own user through its own endpoint only', () => {
    const calls = new ParkedCalls();
    const { call } = parkedCall('user-a');
    const id = calls.park(call, [ask])!;
    assert.equal(calls.take(id, { userKey: 'user-b', endpoint: 'a' }), undefined, "another user's retry");
    assert.equal(calls.take(id, { userKey: 'user-a', endpoint: 'b' }), undefined, 'a retry through another endpoint');
    assert.ok(calls.has(id), 'still held for its user');
    assert.deepEqual(calls.take(id, { userKey: 'user-a', endpoint: 'a' }), { call, asks: [ask] });
    assert.equal(calls.take(id, { userKey: 'user-a', endpoint: 'a' }), undefined, 'a second retry with the same state');
    assert.equal(calls.size, 0);
    calls.close();
  });

  test("a user's parked calls are bounded: one more is refused until one is taken; other users are not counted", () => {
    const calls = new ParkedCalls(60_000, 2);
    const ids = [calls.park(parkedCall('user-a').call, [ask]), calls.park(parkedCall('user-a').call, [ask])];
    assert.ok(ids.every((id) => typeof id === 'string'));
    assert.equal(calls.park(parkedCall('user-a').call, [ask]), undefined, 'a third of the same user');
    assert.equal(typeof calls.park(parkedCall('user-b').call, [ask]), 'string', "another user's first");
    calls.take(ids[0]!, { userKey: 'user-a', endpoint: 'a' });
    assert.equal(typeof calls.park(parkedCall('user-a').call, [ask]), 'string', 'room again once one was taken');
    calls.close();
  });

  test('nobody comes back in time: the backend gets an error for its request and its connection is closed', async () => {
    const calls = new ParkedCalls(30);
    const { call, sent, destroyed } = parkedCall('user-a');
    const id = calls.park(call, [ask])!;
    await until('the call to be given up', () => destroyed());
    assert.deepEqual(sent, [{ jsonrpc: '2.0', id: 7, error: { code: -32603, message: 'the client did not answer in time' } }]);
    assert.equal(calls.take(id, { userKey: 'user-a', endpoint: 'a' }), undefined);
  });

  test('the gateway stopping gives every call up', async () => {
    const calls = new ParkedCalls();
    const first = parkedCall('user-a');
    const second = parkedCall('user-b');
    calls.park(first.call, [ask]);
    calls.park(second.call, [{ ...ask, backendId: 8 }]);
    calls.close();
    await until('both connections closed', () => first.destroyed() && second.destroyed());
    assert.equal(first.sent[0]?.id, 7);
    assert.equal(second.sent[0]?.id, 8);
    assert.match(String((first.sent[0]?.error as { message?: string }).message), /shutting down/);
    assert.equal(calls.size, 0);
  });
});
