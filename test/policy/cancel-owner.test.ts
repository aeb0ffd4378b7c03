/**
 * A `notifications/cancelled` ends a call's audit record at once (policy/rule-policy-backend.ts,
 * MCP 2025-11-25 "Cancellation") only when it comes from the call's own user in the call's own
 * session: the cancellable calls are kept by session, then request id, and the record's user is
 * compared. The face is driven directly, in front of a backend whose answers stay open until the
 * test ends them, so a record is written only by the cancellation or by the answer's end.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { BackendCaller, BackendResponse, McpBackend } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { auditSchema, policySchema } from '../../src/config/policy-schema.js';
import { parseConfig } from '../../src/config/load.js';
import { Audit } from '../../src/ops/audit.js';
import type { Metrics } from '../../src/ops/metrics.js';
import { CelRules } from '../../src/policy/cel-rules.js';
import { RulePolicyBackend } from '../../src/policy/rule-policy-backend.js';

/** A backend whose `tools/call` answers are SSE streams that end only when `finish()` is called. */
function heldBackend(): McpBackend & { finish(): void } {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const held = async function* (): AsyncGenerator<Buffer> {
    await released;
  };
  return {
    name: 'held',
    config: parseConfig({
      publicUrl: 'https://mcp.example.com',
      auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
      backends: [{ name: 'held', url: 'http://127.0.0.1:9/mcp' }],
    }).backends[0]!,
    post: async (body): Promise<BackendResponse> => {
      if (!body.includes('"tools/call"')) return { status: 202, headers: {}, contentType: 'application/json', body: syntheticBody('') };
      return { status: 200, headers: {}, contentType: 'text/event-stream', body: syntheticBody(held()) };
    },
    get: async () => ({ status: 405, headers: {}, contentType: 'application/json', body: syntheticBody('') }),
    delete: async () => ({ status: 202, headers: {}, contentType: 'application/json', body: syntheticBody('') }),
    close: async () => {},
    finish: () => release(),
  };
}

function callerOf(user: string, sessionId: string): BackendCaller {
  return {
    principal: { iss: 'https://issuer.test', sub: user, userKey: `${user}-key`, scopes: new Set(), exp: 0, claims: { sub: user } },
    sessionId,
    log: pino({ level: 'silent' }),
  };
}

const call = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: {} } });
const cancel = (id: number) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } });

/** The face in front of a held backend, with no rules and the audit's records as parsed lines. */
function auditedFace(): { lines: Array<Record<string, unknown>>; inner: ReturnType<typeof heldBackend>; face: RulePolicyBackend } {
  const lines: Array<Record<string, unknown>> = [];
  const audit = new Audit({ write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) }, auditSchema.parse({}));
  const inner = heldBackend();
  const rules = new CelRules(policySchema.parse({}));
  return { lines, inner, face: new RulePolicyBackend(inner, { rules: () => rules, audit: () => audit, metrics: {} as Metrics }) };
}

test('a cancellation ends the record of its own user\'s call in its own session, and no other', async () => {
  const { lines, inner, face } = auditedFace();
  const alice = callerOf('alice', 'session-1');
  /** Each record as user:session:request id:outcome (the record's user is the first characters of the user key). */
  const outcomes = () => lines.map((l) => `${String(l.user).slice(0, 5)}:${l.session}:${l.requestId}:${l.outcome}`);

  // Alice's call 7 in session-1, and call 7 of the same id in her other session.
  const answers = [await face.post(call(7), { caller: alice }), await face.post(call(7), { caller: callerOf('alice', 'session-2') })];
  assert.equal(lines.length, 0, 'both calls wait for their answers');

  // Bob names Alice's session and request id: nothing ends (a route would have refused him the session; the face checks the user too).
  await face.post(cancel(7), { caller: callerOf('bob', 'session-1') });
  // Alice cancels an id she has not sent, and in a session without calls.
  await face.post(cancel(8), { caller: alice });
  await face.post(cancel(7), { caller: callerOf('alice', 'session-3') });
  assert.equal(lines.length, 0, 'no record is written for another user, another id or another session');

  await face.post(cancel(7), { caller: alice });
  assert.deepEqual(outcomes(), ['alice:session-1:7:cancelled'], 'Alice\'s own cancellation ends her call in that session, at once');

  // The answers end: the call of session-2 is recorded as unanswered; the cancelled one is not recorded twice.
  inner.finish();
  for (const answer of answers) for await (const chunk of answer.body) void chunk;
  assert.equal(lines.length, 2, 'one record a call');
  assert.match(outcomes()[1]!, /^alice:session-2:7:/);
  assert.notEqual(lines[1]!.outcome, 'cancelled');
});

test('in a 2025-03-26 batch, each call is its own record: one cancelled by its id, the others at the answer\'s end', async () => {
  const { lines, inner, face } = auditedFace();
  const alice = callerOf('alice', 'session-1');
  const ids = () => lines.map((l) => `${JSON.stringify(l.requestId)}:${l.outcome}`);
  // The first call, a second, and a third whose id is the first's as a string: three records.
  const batch = `[${call(7)},${call(8)},${JSON.stringify({ jsonrpc: '2.0', id: '7', method: 'tools/call', params: { name: 'slow', arguments: {} } })}]`;
  const answer = await face.post(batch, { caller: alice });
  await face.post(cancel(8), { caller: alice });
  assert.deepEqual(ids(), ['8:cancelled'], 'the second call of the batch, cancelled by its id, at once');
  await face.post(cancel(7), { caller: alice });
  assert.deepEqual(ids(), ['8:cancelled', '7:cancelled'], 'the first, by its number id: not the call whose id is "7"');
  inner.finish();
  for await (const chunk of answer.body) void chunk;
  assert.equal(lines.length, 3, 'one record a call');
  assert.equal(JSON.stringify(lines[2]!.requestId), '"7"');
  assert.notEqual(lines[2]!.outcome, 'cancelled');
});
