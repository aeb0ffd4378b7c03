/**
 * The local bridge's own HTTP rules (src/backends/bridge/bridge-server.ts), spoken to
 * directly over HTTP on 127.0.0.1 with a real legacy HTTP+SSE server behind it
 * (test/fixtures/legacy-2024-sse-server.ts; stdio backends have no bridge of their own any
 * more: test/backends/stdio-backend.test.ts): the per-bridge key is
 * required, unknown sessions are 404 (the gateway's "session ended"), a request without a
 * session must be `initialize`, and the session cap refuses with 503 and a JSON-RPC error
 * until a slot is freed; a user (named by the gateway in an internal header) past their
 * share gets a JSON-RPC error while others still get sessions.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { BRIDGE_KEY_HEADER, BRIDGE_USER_HEADER, BridgeServer } from '../../src/backends/bridge/bridge-server.js';
import { parseConfig } from '../../src/config/load.js';
import type { BackendConfig } from '../../src/config/schema.js';
import { startLegacy2024SseServer, type Legacy2024SseServer } from '../fixtures/legacy-2024-sse-server.js';

let legacy: Legacy2024SseServer;
let backend: BackendConfig;
let bridge: BridgeServer | undefined;
let gatewayConfig: BackendConfig;

function initializeBody(id: number): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bridge-server-test', version: '1.0.0' } },
  });
}

async function call(method: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string; sessionId: string | null }> {
  const res = await fetch(gatewayConfig.url!, {
    method,
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, text: await res.text(), sessionId: res.headers.get('mcp-session-id') };
}

const withKey = () => ({ [BRIDGE_KEY_HEADER]: gatewayConfig.headers[BRIDGE_KEY_HEADER]! });

before(async () => {
  legacy = await startLegacy2024SseServer();
  backend = parseConfig({
    publicUrl: 'http://127.0.0.1:1',
    auth: { issuer: 'http://127.0.0.1:2', audience: 'http://127.0.0.1:1/mcp' },
    backends: [{ name: 'local', transport: 'sse', url: legacy.url, timeout: '15s' }],
  }).backends[0]!;
  bridge = new BridgeServer({ backend, idleMs: 60_000, maxSessions: 1, log: pino({ level: 'silent' }) });
  await bridge.start();
  gatewayConfig = bridge.gatewayConfig();
});

after(async () => {
  await bridge?.close();
  await legacy?.close();
});

describe('the bridge endpoint', () => {
  test('the gateway config keeps the backend settings, points at 127.0.0.1 and carries the key', () => {
    assert.match(gatewayConfig.url!, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    assert.equal(gatewayConfig.name, 'local');
    assert.equal(gatewayConfig.timeout, 15_000);
    assert.ok((gatewayConfig.headers[BRIDGE_KEY_HEADER] ?? '').length >= 32);
  });

  test('requests without the key, or with a wrong one, are refused (403) before anything starts', async () => {
    assert.equal((await call('POST', {}, initializeBody(1))).status, 403);
    assert.equal((await call('POST', { [BRIDGE_KEY_HEADER]: 'x'.repeat(43) }, initializeBody(1))).status, 403);
    assert.equal(bridge!.sessionCount, 0);
  });

  test('an unknown session id is 404 with a JSON-RPC error; no session and no initialize is 400', async () => {
    const unknown = await call('POST', { ...withKey(), 'mcp-session-id': 'no-such-session' }, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    assert.equal(unknown.status, 404);
    assert.equal((JSON.parse(unknown.text) as { error: { code: number } }).error.code, -32001);
    const noSession = await call('POST', withKey(), JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    assert.equal(noSession.status, 400);
    assert.equal((await call('GET', withKey())).status, 400);
  });

  test('beyond the session cap initialize gets 503 with a JSON-RPC error; a freed slot is usable again', async () => {
    const first = await call('POST', withKey(), initializeBody(1));
    assert.equal(first.status, 200, first.text);
    assert.match(first.text, /"result":\{/);
    assert.ok(first.sessionId);
    assert.equal(bridge!.sessionCount, 1);

    const refused = await call('POST', withKey(), initializeBody(2));
    assert.equal(refused.status, 503);
    const body = JSON.parse(refused.text) as { id: number; error: { code: number; message: string } };
    assert.equal(body.id, 2);
    assert.equal(body.error.code, -32010);
    assert.match(body.error.message, /too many open sessions \(at most 1\)/);

    const deleted = await call('DELETE', { ...withKey(), 'mcp-session-id': first.sessionId });
    assert.equal(deleted.status, 200);
    assert.equal(bridge!.sessionCount, 0);
    assert.equal((await call('POST', { ...withKey(), 'mcp-session-id': first.sessionId }, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }))).status, 404);

    const again = await call('POST', withKey(), initializeBody(4));
    assert.equal(again.status, 200, again.text);
    assert.ok(again.sessionId && again.sessionId !== first.sessionId);
  });
});

describe('sessions per user', () => {
  test("past bridge.maxSessionsPerUser a user's initialize gets a JSON-RPC error; other users, and calls naming none, still fit", async (t) => {
    const shared = new BridgeServer({ backend, idleMs: 60_000, maxSessions: 3, maxSessionsPerUser: 1, log: pino({ level: 'silent' }) });
    t.after(() => shared.close());
    await shared.start();
    const key = { [BRIDGE_KEY_HEADER]: shared.gatewayConfig().headers[BRIDGE_KEY_HEADER]! };
    const open = async (headers: Record<string, string>, id: number) => {
      const res = await fetch(shared.gatewayConfig().url!, { method: 'POST', headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...key, ...headers }, body: initializeBody(id), signal: AbortSignal.timeout(15_000) });
      return { status: res.status, text: await res.text(), sessionId: res.headers.get('mcp-session-id') };
    };
    assert.ok((await open({ [BRIDGE_USER_HEADER]: 'user-a' }, 1)).sessionId);
    const refused = await open({ [BRIDGE_USER_HEADER]: 'user-a' }, 2);
    assert.equal(refused.status, 200);
    const body = JSON.parse(refused.text) as { id: number; error: { code: number; message: string } };
    assert.deepEqual([body.id, body.error.code], [2, -32010]);
    assert.match(body.error.message, /you have too many open sessions with backend "local" \(at most 1\)/);
    assert.equal(shared.sessionCount, 1, 'the refusal started nothing');

    assert.ok((await open({ [BRIDGE_USER_HEADER]: 'user-b' }, 3)).sessionId, 'another user is not starved');
    // Not a user key: counted towards the backend's cap only (as a call naming no user).
    assert.ok((await open({ [BRIDGE_USER_HEADER]: 'not a user key!' }, 4)).sessionId);
    assert.equal((await open({}, 5)).status, 503, 'three in all: the backend is full');
  });
});
