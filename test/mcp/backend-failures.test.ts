/**
 * A backend's failure is the backend's (src/backends/errors.ts): the SDK client must get a
 * JSON-RPC error with the gateway's code for it, promptly, never a hang or an HTML 5xx, and
 * the gateway must keep serving everything else. And when the backend itself answers with a
 * JSON-RPC error, that error must reach the client exactly as sent.
 *
 *   -32010 backend unavailable (refused, HTTP error)   -32011 backend timeout
 *   -32012 backend stream ended before the response
 *
 * Backends: test/fixtures/misbehaving-backend.ts (a scripted in-process one, and an SDK
 * server in a child process that the test kills and restarts).
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema, McpError, type CallToolResult, type LoggingMessageNotification } from '@modelcontextprotocol/sdk/types.js';
import {
  SCRIPTED_ERROR_DATA,
  SCRIPTED_ERROR_MESSAGE,
  startScriptedBackend,
  type ScriptedBackend,
} from '../fixtures/misbehaving-backend.js';
import { spawnChild, type ChildHandle } from '../helpers/child.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { withDeadline } from '../helpers/deadline.js';
import { nodeEntry } from '../helpers/node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/misbehaving-backend.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** What "promptly" means for an error that the gateway produces (timeout 1 s + slack). */
const PROMPT_MS = 5_000;

interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  logs: Array<LoggingMessageNotification['params']>;
  close(): Promise<void>;
}

const clients: Connected[] = [];

async function connect(url: URL, token: string): Promise<Connected> {
  const client = new Client({ name: 'backend-failures-test', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    // A dead backend makes the standalone GET stream end; do not let reconnects run on.
    reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 1 },
  });
  const logs: Array<LoggingMessageNotification['params']> = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
  client.onerror = () => {};
  const connected: Connected = { client, transport, logs, close: () => client.close().catch(() => {}) };
  clients.push(connected);
  await withDeadline(client.connect(transport), 10_000, 'client.connect');
  return connected;
}


/** Runs `operation`, expecting it to reject within `ms`; returns the error and the time it took. */
async function failure(operation: () => Promise<unknown>, ms: number, what: string): Promise<{ error: unknown; elapsed: number }> {
  const started = Date.now();
  try {
    const value = await withDeadline(operation(), ms, what);
    assert.fail(`${what} succeeded: ${JSON.stringify(value)}`);
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    return { error, elapsed: Date.now() - started };
  }
}

function assertMcpError(error: unknown, code: number): asserts error is McpError {
  assert.ok(error instanceof McpError, `expected an McpError ${code}, got ${String((error as Error)?.stack ?? error)}`);
  assert.equal(error.code, code, `McpError code (message: ${error.message})`);
}

function textOf(result: unknown): string {
  return ((result as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

async function healthz(gateway: GatewayHandle): Promise<number> {
  const res = await fetch(`${gateway.url}/healthz`, { signal: AbortSignal.timeout(3_000) });
  await res.body?.cancel();
  return res.status;
}

// ------------------------------------------------------------------------------ fixture ---

let oauth: OAuthHandle | undefined;
let scripted: ScriptedBackend | undefined;
let killable: ChildHandle | undefined;
let killablePort = 0;
let deadPort = 0;
let gateway: GatewayHandle | undefined;
let token = '';

async function startKillable(port: number): Promise<ChildHandle> {
  return spawnChild({
    name: 'killable backend',
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    cwd: ROOT,
    env: { SB_MISBEHAVING_CHILD: '1', PORT: String(port) },
    readyTimeoutMs: 20_000,
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
}

before(async () => {
  [oauth, scripted, killable, deadPort] = await Promise.all([startOAuthServer(), startScriptedBackend(), startKillable(0), freePort()]);
  const killableUrl = (JSON.parse(killable.readyLine!) as { url: string }).url;
  killablePort = Number(new URL(killableUrl).port);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      { name: 'scripted', url: scripted.url, timeout: '1s' },
      { name: 'down', url: `http://127.0.0.1:${deadPort}/mcp`, timeout: '5s' },
      { name: 'killable', url: killableUrl, timeout: '10s' },
    ],
  });
  token = await oauth.token({ sub: 'carol', aud: gateway.audience });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), scripted?.close(), killable?.stop()]);
});

// -------------------------------------------------------------------------------- tests ---

describe('a backend that does not answer in time (timeout 1s)', () => {
  let session: Connected;
  before(async () => {
    session = await connect(gateway!.endpoint('scripted'), token);
  });

  test('no response headers: the client gets McpError -32011 promptly, while other requests are served', async () => {
    const hanging = failure(() => session.client.callTool({ name: 'hang', arguments: {} }), PROMPT_MS, 'tools/call hang');
    // While the call hangs, the same session and the gateway keep working.
    const ok = await withDeadline(session.client.callTool({ name: 'ok', arguments: { text: 'meanwhile' } }), 2_000, 'ok during hang');
    assert.equal(textOf(ok), 'ok: meanwhile');
    assert.equal(await healthz(gateway!), 200);

    const { error, elapsed } = await hanging;
    assertMcpError(error, -32011);
    assert.ok(elapsed >= 900, `the timeout is 1 s, the error came after ${elapsed} ms`);
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
    assert.equal((error.data as { backend?: string } | undefined)?.backend, 'scripted');
    assert.ok(scripted!.calls.includes('hang'), 'the call reached the backend');
  });

  test('SSE headers, then silence: McpError -32011 promptly', async () => {
    const { error, elapsed } = await failure(() => session.client.callTool({ name: 'hang-stream', arguments: {} }), PROMPT_MS, 'tools/call hang-stream');
    assertMcpError(error, -32011);
    assert.ok(elapsed >= 900 && elapsed < PROMPT_MS, `error after ${elapsed} ms`);
    assert.ok(scripted!.calls.includes('hang-stream'), 'the call reached the backend');
  });

  test('the session still works after the timeouts', async () => {
    const ok = await withDeadline(session.client.callTool({ name: 'ok', arguments: { text: 'after' } }), 2_000, 'ok after hang');
    assert.equal(textOf(ok), 'ok: after');
    assert.deepEqual(await session.client.ping(), {});
  });
});

describe('a backend that is down (connection refused)', () => {
  test('initialize fails with McpError -32010, promptly', async () => {
    const { error, elapsed } = await failure(() => connect(gateway!.endpoint('down'), token), PROMPT_MS, 'connect to a down backend');
    assertMcpError(error, -32010);
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
    assert.equal((error.data as { backend?: string } | undefined)?.backend, 'down');
  });

  test('on the wire: a JSON-RPC error answering the initialize request, not a 5xx page', async () => {
    const res = await fetch(gateway!.endpoint('down'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'init-1',
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
      signal: AbortSignal.timeout(PROMPT_MS),
    });
    assert.ok(res.status < 500, `HTTP ${res.status}`);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(res.headers.get('mcp-session-id'), null, 'no session for a failed initialize');
    const body = (await res.json()) as { jsonrpc: string; id: unknown; error?: { code: number; message: string } };
    assert.equal(body.jsonrpc, '2.0');
    assert.equal(body.id, 'init-1');
    assert.equal(body.error?.code, -32010);
  });
});

describe('a backend answering HTTP 500', () => {
  test('tools/call → McpError -32010 with data.status 500; the session survives', async () => {
    const session = await connect(gateway!.endpoint('scripted'), token);
    const { error, elapsed } = await failure(() => session.client.callTool({ name: 'fail-500', arguments: {} }), PROMPT_MS, 'tools/call fail-500');
    assertMcpError(error, -32010);
    assert.ok(elapsed < PROMPT_MS);
    const data = error.data as { status?: number; backend?: string } | undefined;
    assert.equal(data?.status, 500);
    assert.equal(data?.backend, 'scripted');
    assert.doesNotMatch(error.message, /Internal Server Error: the scripted backend fell over/, 'the backend body is not leaked');
    const ok = await session.client.callTool({ name: 'ok', arguments: { text: 'still' } });
    assert.equal(textOf(ok), 'ok: still');
  });
});

describe('a backend that closes its SSE stream without responding', () => {
  test('no event ids, no response → McpError -32012; what it sent before is relayed', async () => {
    const session = await connect(gateway!.endpoint('scripted'), token);
    const { error, elapsed } = await failure(() => session.client.callTool({ name: 'sse-close', arguments: {} }), PROMPT_MS, 'tools/call sse-close');
    assertMcpError(error, -32012);
    assert.ok(elapsed < PROMPT_MS);
    assert.ok(
      session.logs.some((l) => l.data === 'working on it'),
      `the notification sent before the close was relayed: ${JSON.stringify(session.logs)}`,
    );
    const ok = await session.client.callTool({ name: 'ok', arguments: { text: 'again' } });
    assert.equal(textOf(ok), 'ok: again');
  });
});

describe('a backend JSON-RPC error is relayed exactly', () => {
  for (const tool of ['url-required', 'url-required-sse']) {
    test(`-32042 with a data object (${tool === 'url-required' ? 'JSON' : 'SSE'} answer)`, async () => {
      const session = await connect(gateway!.endpoint('scripted'), token);
      const { error } = await failure(() => session.client.callTool({ name: tool, arguments: {} }), PROMPT_MS, `tools/call ${tool}`);
      assertMcpError(error, -32042);
      assert.deepEqual(error.data, SCRIPTED_ERROR_DATA);
      assert.ok(error.message.includes(SCRIPTED_ERROR_MESSAGE), error.message);
    });
  }

  test('on the wire, unknown fields of the error data included', async () => {
    const session = await connect(gateway!.endpoint('scripted'), token);
    const extra = { nested: { list: [1, 'two', null, { deep: true }] }, unicode: 'é✓' };
    for (const tool of ['url-required', 'url-required-sse']) {
      const res = await fetch(gateway!.endpoint('scripted'), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
          'mcp-session-id': session.transport.sessionId!,
          'mcp-protocol-version': '2025-11-25',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 77, method: 'tools/call', params: { name: tool, arguments: { extra } } }),
        signal: AbortSignal.timeout(PROMPT_MS),
      });
      assert.equal(res.status, 200);
      const text = await res.text();
      const json = (res.headers.get('content-type') ?? '').startsWith('text/event-stream')
        ? text
            .split(/\r?\n/)
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim())
            .find((d) => d.includes('"id":77'))
        : text;
      assert.ok(json, `no response in ${text}`);
      assert.deepEqual(JSON.parse(json), {
        jsonrpc: '2.0',
        id: 77,
        error: { code: -32042, message: SCRIPTED_ERROR_MESSAGE, data: { ...SCRIPTED_ERROR_DATA, extra } },
      });
    }
  });
});

describe('a backend process killed mid-call', () => {
  test('the call ends with an error promptly, the gateway stays up, and a restarted backend serves new sessions', async () => {
    const session = await connect(gateway!.endpoint('killable'), token);
    const echo = await session.client.callTool({ name: 'echo', arguments: { message: 'before' } });
    assert.equal(textOf(echo), 'echo: before');

    let progressed!: () => void;
    const firstProgress = new Promise<void>((resolve) => (progressed = resolve));
    const call = session.client.callTool({ name: 'slow', arguments: {} }, undefined, { onprogress: () => progressed(), timeout: 60_000 });
    call.catch(() => {});
    await withDeadline(firstProgress, 5_000, 'first progress from the slow tool');

    const killedAt = Date.now();
    killable!.process.kill('SIGKILL');
    await withDeadline(killable!.exited, 5_000, 'the backend to die');
    const { error } = await failure(() => call, PROMPT_MS, 'the call on a killed backend');
    const elapsed = Date.now() - killedAt;
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
    // The response stream broke under the relay: "stream ended before the response".
    assertMcpError(error, -32012);
    assert.equal((error.data as { backend?: string } | undefined)?.backend, 'killable');

    assert.equal(await healthz(gateway!), 200);
    // While it is down, a request on the session is answered with -32010, not left hanging.
    const down = await failure(() => session.client.callTool({ name: 'echo', arguments: { message: 'anyone?' } }), PROMPT_MS, 'call while the backend is down');
    assertMcpError(down.error, -32010);
    assert.equal((down.error.data as { reason?: string } | undefined)?.reason, 'unreachable');

    killable = await startKillable(killablePort);
    // The old session's backend session died with the process: the gateway says "not found".
    const stale = await failure(() => session.client.callTool({ name: 'echo', arguments: { message: 'stale' } }), PROMPT_MS, 'call on the stale session');
    assert.equal((stale.error as { code?: number }).code, 404, `stale session: ${String(stale.error)}`);

    const fresh = await connect(gateway!.endpoint('killable'), token);
    const again = await fresh.client.callTool({ name: 'echo', arguments: { message: 'after restart' } });
    assert.equal(textOf(again), 'echo: after restart');
    assert.equal(await healthz(gateway!), 200);
  });
});
