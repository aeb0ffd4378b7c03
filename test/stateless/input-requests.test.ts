/**
 * The names of a 2025 backend's requests as 2026 input keys (src/stateless/input-requests.ts):
 * generated from kind and id, or chosen by the backend through `io.switchboard/input-key`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { INPUT_KEY_META, judgeServerRequest } from '../../src/stateless/input-requests.js';

const declared = { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} };

function askOf(params: Record<string, unknown>, taken: string[] = [], id = 4) {
  const verdict = judgeServerRequest({ jsonrpc: '2.0', id, method: 'elicitation/create', params }, declared, new Set(taken));
  assert.equal(verdict.kind, 'ask');
  return (verdict as Extract<typeof verdict, { kind: 'ask' }>).ask;
}

describe('input keys of a 2025 backend\'s requests', () => {
  it('names a request after its kind and JSON-RPC id when the backend names nothing', () => {
    const ask = askOf({ message: 'Name?' });
    assert.equal(ask.key, 'elicitation-4');
    assert.deepEqual(ask.params, { message: 'Name?' });
  });

  it('uses the key the backend chose, and takes the hint off the request the client sees', () => {
    const ask = askOf({ message: 'Name?', _meta: { [INPUT_KEY_META]: 'user_name', 'example.com/trace': 'x' } });
    assert.equal(ask.key, 'user_name');
    assert.deepEqual(ask.params, { message: 'Name?', _meta: { 'example.com/trace': 'x' } });
    assert.deepEqual(askOf({ message: 'Name?', _meta: { [INPUT_KEY_META]: 'user_name' } }).params, { message: 'Name?' });
  });

  it('falls back to the generated key for a malformed, reserved or already taken name', () => {
    for (const hint of ['', 'has space', 'x'.repeat(65), 42, 'io.switchboard/link']) {
      const ask = askOf({ message: 'Name?', _meta: { [INPUT_KEY_META]: hint } });
      assert.equal(ask.key, 'elicitation-4', `hint ${JSON.stringify(hint)}`);
      assert.equal(ask.params._meta, undefined);
    }
    assert.equal(askOf({ message: 'Again?', _meta: { [INPUT_KEY_META]: 'user_name' } }, ['user_name'], 9).key, 'elicitation-9');
  });
});
