/**
 * The two forms in which a replica holding a bridged call sends a handed-over attempt back
 * (src/stateless/bridge-replicas.ts): numbered pieces as the backend sends them, to a replica
 * that says it reads them (`bridge-resume` with `pieces`), or the whole attempt in one
 * `bridge-outcome`, as a replica of an earlier release reads it during a rolling upgrade.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sendPieces, sendWhole, type OutcomeFields } from '../../src/stateless/bridge-replicas.js';
import type { AttemptMessage } from '../../src/stateless/bridged-call.js';

async function* attempt(messages: AttemptMessage[], failAfter?: number): AsyncGenerator<AttemptMessage> {
  for (const [n, message] of messages.entries()) {
    if (n === failAfter) throw new Error('the backend went away');
    yield message;
  }
}

const progress: AttemptMessage = { data: '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}' };
const answer: AttemptMessage = { data: '{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","content":[]}}', final: { status: 200 } };

function recorder() {
  const sent: OutcomeFields[] = [];
  return { sent, reply: async (outcome: OutcomeFields) => void sent.push(outcome) };
}

describe('a handed-over attempt sent back', () => {
  it('in pieces: one message each, numbered, the last not marked more', async () => {
    const { sent, reply } = recorder();
    await sendPieces(attempt([progress, answer]), reply);
    assert.deepEqual(sent, [
      { seq: 0, messages: [progress.data], status: undefined, more: true },
      { seq: 1, messages: [answer.data], status: 200, more: false },
    ]);
  });

  it('whole, to a replica that did not ask for pieces: every message in one outcome, with the final status', async () => {
    const { sent, reply } = recorder();
    await sendWhole(attempt([progress, answer]), reply);
    assert.deepEqual(sent, [{ messages: [progress.data, answer.data], status: 200 }]);
  });

  it('whole, when the attempt fails before its answer: an empty outcome (the call is gone), never a progress notification taken for the answer', async () => {
    const { sent, reply } = recorder();
    await assert.rejects(sendWhole(attempt([progress, answer], 1), reply));
    assert.deepEqual(sent, [{}]);
  });

  it('in pieces, when the attempt fails midway: a closing piece tells the other replica it is over', async () => {
    const { sent, reply } = recorder();
    await assert.rejects(sendPieces(attempt([progress, answer], 1), reply));
    assert.deepEqual(sent.at(-1), { seq: 1, more: false });
  });
});
