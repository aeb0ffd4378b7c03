/**
 * What a client message may not be (src/wire/json-guard.ts, issue 13): nested deeper than
 * MAX_JSON_DEPTH, or holding an object with two members of the same name. First the scanner
 * alone (strings, escapes, siblings, large objects); then end to end with real parts — a real
 * Redis, the real OAuth server, the gateway in-process and a raw node:http backend that
 * records what reaches it and reads tool names first-wins:
 *  - a 500,000-level array inside `initialize` is a 400 parse error (-32700) with nothing left
 *    behind: the backend never called, no session stored (before: the session record's
 *    `JSON.stringify` overflowed the stack, the client got 503 "state unavailable" and the
 *    backend session leaked);
 *  - a `tools/call` naming a denied tool first and an allowed one second is refused (400,
 *    -32600) and never reaches the backend (before: the policy judged the last name, the
 *    backend called the first).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { jsonShapeProblem, MAX_JSON_DEPTH } from '../../src/wire/json-guard.js';
import { parseMessages } from '../../src/wire/jsonrpc.js';
import { startFirstWinsBackend, type FirstWinsBackend } from '../fixtures/first-wins-backend.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('jsonShapeProblem', () => {
  test('depth counts arrays and objects outside strings, up to the limit', () => {
    assert.equal(jsonShapeProblem(nested(MAX_JSON_DEPTH)), undefined);
    assert.deepEqual(jsonShapeProblem(nested(MAX_JSON_DEPTH + 1)), { kind: 'depth' });
    assert.deepEqual(jsonShapeProblem('{"a":'.repeat(10) + '1' + '}'.repeat(10), 9), { kind: 'depth' });
    assert.equal(jsonShapeProblem(JSON.stringify({ text: '['.repeat(10_000) + '"\\{' })), undefined, 'brackets in strings do not count');
    assert.equal(jsonShapeProblem(`[${nested(100)},${nested(100)},${nested(100)}]`), undefined, 'siblings do not add up');
  });

  test('finds two members of one name in any object, after unescaping', () => {
    assert.deepEqual(jsonShapeProblem('{"name":"a","name":"b"}'), { kind: 'duplicate', name: 'name' });
    assert.deepEqual(jsonShapeProblem('{"params":{"name":"a","n\\u0061me":"b"}}'), { kind: 'duplicate', name: 'name' });
    assert.deepEqual(jsonShapeProblem('[{"x":[{"y":1,"y" :2}]}]'), { kind: 'duplicate', name: 'y' });
    assert.deepEqual(jsonShapeProblem('{"a\\"b":1,"a\\"b":2}'), { kind: 'duplicate', name: 'a"b' });
    const wide = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, i]));
    assert.equal(jsonShapeProblem(JSON.stringify(wide)), undefined);
    assert.deepEqual(jsonShapeProblem(JSON.stringify(wide).replace('}', ',"k7":0}')), { kind: 'duplicate', name: 'k7' }, 'large objects too');
  });

  test('equal names in different objects, values equal to names, and strings with quotes are fine', () => {
    const ok = [
      '{"name":"name","params":{"name":"x","arguments":{"name":"y"}}}',
      '[{"id":1},{"id":2}]',
      '{"a":{"b":1},"b":{"a":1},"c":["a","a"]}',
      '{"s":"\\\\","t":"\\\\\\"","u":"\\"name\\":"}',
      '{"a":{},"b":{},"a2":[{}, {"a":1}]}',
    ];
    for (const text of ok) assert.equal(jsonShapeProblem(text), undefined, text);
  });

  test('each scan starts clean: names kept between calls never leak into the next message', () => {
    // The per-depth name lists are reused (issue 29): a scan that stopped early, deep inside,
    // and one that switched an object to a Set must leave nothing behind.
    assert.deepEqual(jsonShapeProblem('{"a":{"b":{"c":1,"c":2}}}'), { kind: 'duplicate', name: 'c' });
    assert.equal(jsonShapeProblem('{"a":{"b":{"c":1}}}'), undefined, 'after an early return at depth 3');
    const wide = JSON.stringify(Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, i])));
    assert.equal(jsonShapeProblem(wide), undefined);
    assert.equal(jsonShapeProblem('{"k1":1,"k2":2}'), undefined, 'after a large object');
    assert.deepEqual(jsonShapeProblem(nested(MAX_JSON_DEPTH + 1)), { kind: 'depth' });
    assert.equal(jsonShapeProblem('{"a":1,"b":[{"a":1}],"c":{"a":{"a":1}}}'), undefined, 'after the depth limit');
    for (let i = 0; i < 3; i++) assert.equal(jsonShapeProblem('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"id":1}}}'), undefined);
  });

  test('names are compared whole: prefixes, equal lengths and escapes on either side', () => {
    assert.equal(jsonShapeProblem('{"ab":1,"abc":2,"abd":3,"a":4,"":5,"b":6}'), undefined);
    assert.deepEqual(jsonShapeProblem('{"":1,"x":2,"":3}'), { kind: 'duplicate', name: '' });
    assert.deepEqual(jsonShapeProblem('{"n\\u0061me":1,"name":2}'), { kind: 'duplicate', name: 'name' }, 'the escaped one first');
    assert.deepEqual(jsonShapeProblem('{"\\u0061":1,"\\u0061":2}'), { kind: 'duplicate', name: 'a' }, 'both escaped');
    assert.equal(jsonShapeProblem('{"\\u0061":1,"b":2,"\\u0062c":3}'), undefined);
  });

  test('parseMessages: depth → -32700 before parsing, a duplicate → -32600 naming the key', () => {
    assert.throws(() => parseMessages(`{"jsonrpc":"2.0","id":1,"method":"x","params":${nested(500_000)}}`, true), { code: -32700, message: /nested deeper than 128/ });
    assert.throws(() => parseMessages('{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}', false), { code: -32600, message: /duplicate key "method"/ });
    assert.throws(() => parseMessages('{"jsonrpc":"2.0","id":1,"method":"ping",', false), { code: -32700 }, 'not JSON stays a parse error');
  });
});

// ------------------------------------------------------------------------- end to end ---

let oauth: OAuthHandle | undefined;
let redis: RedisHandle | undefined;
let backend: FirstWinsBackend | undefined;
let gateway: GatewayHandle | undefined;
let token = '';

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startFirstWinsBackend()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    redisUrl: redis.url,
    backends: [{ name: 'files', url: backend.url, timeout: '10s', access: { tools: { deny: ['delete-*'] } } }],
  });
  token = await oauth.token({ sub: 'alice', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), redis?.stop(), backend?.close()]);
});

function post(body: string, sessionId?: string): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
  if (sessionId) Object.assign(headers, { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' });
  return fetch(gateway!.endpoint('files'), { method: 'POST', headers, body, signal: AbortSignal.timeout(15_000) });
}

const initialize = (capabilities: string) =>
  `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":${capabilities},"clientInfo":{"name":"t","version":"1"}}}`;

describe('through the gateway', () => {
  test('a 500,000-level array is a 400 parse error; no backend call, no session', async () => {
    const sessionsBefore = await gateway!.app.mcp.store.countSessions();
    const methodsBefore = backend!.methods.length;
    const res = await post(initialize(`{"x":${nested(500_000)}}`));
    assert.equal(res.status, 400);
    const body = (await res.json()) as { id: unknown; error: { code: number; message: string } };
    assert.equal(body.error.code, -32700);
    assert.equal(body.id, null);
    assert.deepEqual(backend!.methods.slice(methodsBefore), [], 'the backend was not called');
    assert.equal(await gateway!.app.mcp.store.countSessions(), sessionsBefore, 'no session stored');
  });

  test('a tools/call naming a denied tool and then an allowed one is refused before the backend', async () => {
    const init = await post(initialize('{}'));
    assert.equal(init.status, 200);
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.body?.cancel();
    // The policy works: a plain call of the denied tool is answered by the gateway.
    const denied = await post('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete-all","arguments":{}}}', sessionId);
    assert.match(JSON.stringify(await denied.json()), /Unknown tool: delete-all/);

    const res = await post('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete-all","name":"read","arguments":{}}}', sessionId);
    const body = (await res.json()) as { error?: { code: number; message: string } };
    assert.deepEqual(backend!.calls, [], `the backend was called with ${JSON.stringify(backend!.calls)}`);
    assert.equal(res.status, 400);
    assert.equal(body.error?.code, -32600);
    assert.match(body.error!.message, /duplicate key "name"/);

    // Escaped spellings of the same name are the same name.
    const escaped = await post('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete-all","n\\u0061me":"read","arguments":{}}}', sessionId);
    assert.equal(escaped.status, 400);
    await escaped.body?.cancel();
    // The gateway still forwards an honest call.
    const honest = await post('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read","arguments":{"name":"x"}}}', sessionId);
    assert.equal(honest.status, 200);
    assert.match(await honest.text(), /called read/);
    assert.deepEqual(backend!.calls, ['read']);
  });
});
