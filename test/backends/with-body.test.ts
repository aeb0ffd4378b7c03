/**
 * `withBody` (src/backends/body.ts): a response with another body, as `{ ...res, body }` made it
 * — the same members, `refused` only when the response has it — without the spread.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody, withBody } from '../../src/backends/body.js';

test('the members of the response, the new body, and refused only when present', async () => {
  const headers = { 'content-type': 'application/json', 'mcp-session-id': 's-1' };
  const plain: BackendResponse = { status: 200, headers, body: syntheticBody('{"old":1}'), contentType: 'application/json' };
  const body = syntheticBody('{"new":1}');
  const out = withBody(plain, body);
  assert.deepEqual(Object.keys(out).sort(), ['body', 'contentType', 'headers', 'status']);
  assert.equal(out.status, 200);
  assert.equal(out.headers, headers);
  assert.equal(out.contentType, 'application/json');
  assert.equal(out.body, body);
  assert.equal(await out.body.text(), '{"new":1}');
  assert.notEqual(out, plain);

  const refused = withBody({ ...plain, status: 200, refused: true }, body);
  assert.equal(refused.refused, true);
  assert.deepEqual({ ...refused, body: undefined }, { ...plain, refused: true, body: undefined });
});

test('a response made by a class gives a plain object with its public members only', () => {
  class Made implements BackendResponse {
    readonly status = 202;
    readonly headers = {};
    readonly contentType = 'text/event-stream';
    readonly body = syntheticBody('');
    readonly #hidden = 'watch';
    hidden(): string {
      return this.#hidden;
    }
  }
  const out = withBody(new Made(), syntheticBody('x'));
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
  assert.equal(out.status, 202);
  assert.equal(out.contentType, 'text/event-stream');
  assert.equal('refused' in out, false);
});
