/**
 * The gateway's own `requestState` (MCP 2026-07-28 "Multi Round-Trip Requests" §Server
 * Requirements 4–5): sealed, bound to the user, the endpoint, the request and an expiry;
 * anything else is refused, and a backend's state is told apart by its form.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REQUEST_STATE_TTL_MS, RequestStates, requestDigest } from '../../src/stateless/request-state.js';

const KEY = 'k'.repeat(40);
const params = { name: 'search', arguments: { q: 'mcp', page: 2 } };
const A = { userKey: 'user-a', endpoint: 'mail' };

test('a sealed state opens for the same user and request, with its purpose', () => {
  const states = new RequestStates(KEY);
  const state = states.seal(A, 'tools/call', params, { purpose: 'link:github' });
  assert.ok(RequestStates.isOurs(state));
  assert.deepEqual(states.open(state, A, 'tools/call', params), { ok: true, claims: { purpose: 'link:github' } });
});

test('the retry may differ in _meta, inputResponses, requestState and key order', () => {
  const states = new RequestStates(KEY);
  const state = states.seal(A, 'tools/call', params, { purpose: 'link:github' });
  const retry = { arguments: { page: 2, q: 'mcp' }, name: 'search', _meta: { other: 1 }, inputResponses: { x: { action: 'accept' } }, requestState: state };
  assert.equal(states.open(state, A, 'tools/call', retry).ok, true);
});

test('another user, another request, another method, a tampered or a foreign state is refused', () => {
  const states = new RequestStates(KEY);
  const state = states.seal(A, 'tools/call', params, { purpose: 'link:github' });
  assert.deepEqual(states.open(state, { ...A, userKey: 'user-b' }, 'tools/call', params), { ok: false, reason: 'invalid' });
  assert.deepEqual(states.open(state, A, 'tools/call', { ...params, arguments: { q: 'other', page: 2 } }), { ok: false, reason: 'other-request' });
  assert.deepEqual(states.open(state, A, 'prompts/get', params), { ok: false, reason: 'other-request' });
  const flipped = state.slice(0, -2) + (state.endsWith('A') ? 'B' : 'A') + state.slice(-1);
  assert.deepEqual(states.open(flipped, A, 'tools/call', params), { ok: false, reason: 'invalid' });
  assert.deepEqual(new RequestStates('z'.repeat(40)).open(state, A, 'tools/call', params), { ok: false, reason: 'invalid' });
  assert.equal(RequestStates.isOurs('backend-state-123'), false);
  assert.deepEqual(states.open('backend-state-123', A, 'tools/call', params), { ok: false, reason: 'invalid' });
});

test('a state presented at another endpoint than the one that issued it is refused (issue 28 §6)', () => {
  const states = new RequestStates(KEY);
  const state = states.seal(A, 'tools/call', params, { purpose: 'link:github' });
  assert.deepEqual(states.open(state, { ...A, endpoint: 'files' }, 'tools/call', params), { ok: false, reason: 'other-endpoint' });
});

test('a state presented after its expiry is refused as expired', () => {
  let now = 1_000_000;
  const states = new RequestStates(KEY, () => now);
  const state = states.seal(A, 'tools/call', params, { purpose: 'link:github' });
  now += REQUEST_STATE_TTL_MS - 1;
  assert.equal(states.open(state, A, 'tools/call', params).ok, true);
  now += 2;
  assert.deepEqual(states.open(state, A, 'tools/call', params), { ok: false, reason: 'expired' });
});

test('the request digest is the method and the salient params only', () => {
  assert.equal(requestDigest('tools/call', { a: 1, b: [1, { c: 2, d: 3 }] }), requestDigest('tools/call', { b: [1, { d: 3, c: 2 }], a: 1 }));
  assert.notEqual(requestDigest('tools/call', { b: [1, 2] }), requestDigest('tools/call', { b: [2, 1] }));
  assert.notEqual(requestDigest('tools/call', undefined), requestDigest('resources/read', undefined));
});
