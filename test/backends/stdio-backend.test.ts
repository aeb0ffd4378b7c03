/**
 * The stdio backend (src/backends/bridge/stdio-backend.ts) spoken to as the MCP layer speaks
 * to every backend — post, get, delete — with real children behind it: the SDK McpServer on a
 * StdioServerTransport (test/fixtures/stdio-backend.ts) and a deliberately broken one
 * (test/fixtures/broken-stdio-backend.ts). No HTTP between the gateway and the child.
 *
 * Checked: the Streamable HTTP rules the MCP layer relies on (404 for an unknown session, 400
 * without one, one standalone stream); the caps per backend and per user; the answers' shapes
 * (a call's result alone as JSON with its length, progress before it as SSE); cancellation;
 * and children that break the transport — lines that are no message, a line that never ends,
 * a flood of messages with and without a reader, a crash mid-call.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import type { BackendCallHeaders, BackendResponse } from '../../src/backends/backend.js';
import { StdioBackend } from '../../src/backends/bridge/stdio-backend.js';
import { parseConfig } from '../../src/config/load.js';
import { eventDataOf } from '../../src/wire/sse.js';
import { withDeadline } from '../helpers/deadline.js';
import { nodeEntry } from '../helpers/node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/stdio-backend.ts', import.meta.url));
const BROKEN = fileURLToPath(new URL('../fixtures/broken-stdio-backend.ts', import.meta.url));
const VERSION = '2025-11-25';

interface LogRecord {
  level: number;
  msg: string;
  [key: string]: unknown;
}

const backends: StdioBackend[] = [];

/** A StdioBackend for the script `file` with `args` (compiled under npm test, else with tsx: nodeEntry), and what it logged. */
function stdioBackend([file, ...args]: [string, ...string[]], bridge: { maxSessions?: number; maxSessionsPerUser?: number } = {}, timeout = '15s'): { backend: StdioBackend; logged: LogRecord[] } {
  const logged: LogRecord[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logged.push(JSON.parse(line) as LogRecord) });
  const config = parseConfig({
    publicUrl: 'http://127.0.0.1:1',
    auth: { issuer: 'http://127.0.0.1:2', audience: 'http://127.0.0.1:1/mcp' },
    backends: [{ name: 'local', transport: 'stdio', command: process.execPath, args: [...nodeEntry(file), ...args], timeout }],
  }).backends[0]!;
  const backend = new StdioBackend({ backend: config, idleMs: 60_000, ...bridge, log });
  backends.push(backend);
  return { backend, logged };
}

after(async () => {
  await Promise.allSettled(backends.map((b) => b.close()));
});

const asUser = (userKey: string): BackendCallHeaders => ({ caller: { principal: { userKey } } as BackendCallHeaders['caller'] });

function initializeBody(id: number): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: VERSION, capabilities: { sampling: {} }, clientInfo: { name: 'stdio-backend-test', version: '1' } } });
}

async function read(res: BackendResponse): Promise<{ status: number; contentType: string; text: string; length?: string }> {
  const length = res.headers['content-length'];
  return { status: res.status, contentType: res.contentType, text: await withDeadline(res.body.text(), 30_000, 'reading the answer'), length: typeof length === 'string' ? length : undefined };
}

/** Opens a session (initialize + initialized): its id. */
async function open(backend: StdioBackend, headers: BackendCallHeaders = {}): Promise<string> {
  const res = await withDeadline(backend.post(initializeBody(1), headers), 20_000, 'initialize');
  const sessionId = res.headers['mcp-session-id'];
  const answer = await read(res);
  assert.equal(typeof sessionId, 'string', answer.text);
  const initialized = await backend.post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), { sessionId: sessionId as string });
  assert.equal(initialized.status, 202);
  return sessionId as string;
}

function callTool(backend: StdioBackend, sessionId: string, id: number, name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>): Promise<BackendResponse> {
  return backend.post(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } }), { sessionId });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitForExit(pid: number, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > until) assert.fail(`process ${pid} still runs after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const startedPids = (logged: LogRecord[]) => logged.filter((r) => r.msg === 'bridge session started').map((r) => r.pid as number);

describe('the Streamable HTTP rules, without HTTP', () => {
  test('an unknown session is 404 with -32001; no session and no initialize is 400; GET needs a session', async () => {
    const { backend } = stdioBackend([FIXTURE]);
    const unknown = await read(await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { sessionId: 'no-such-session' }));
    assert.equal(unknown.status, 404);
    assert.equal((JSON.parse(unknown.text) as { error: { code: number } }).error.code, -32001);
    assert.equal((await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), {})).status, 400);
    assert.equal((await backend.post('{not json', {})).status, 400);
    assert.equal((await backend.get({})).status, 400);
    assert.equal((await backend.delete({ sessionId: 'no-such-session' })).status, 404);
    assert.equal(backend.sessionCount, 0, 'nothing started');
  });

  test('one standalone stream per session (409 for a second, until the first is given up or aborted); a DELETE ends it and the session (404 after)', async () => {
    const { backend, logged } = stdioBackend([FIXTURE]);
    const sessionId = await open(backend);
    const stream = await backend.get({ sessionId });
    assert.equal(stream.status, 200);
    assert.equal(stream.contentType, 'text/event-stream');
    assert.equal((await backend.get({ sessionId })).status, 409);
    // The relay gives a stream up by aborting its signal: the stream ends and the next GET gets one.
    const controller = new AbortController();
    const held = await backend.get({ sessionId }, controller.signal).catch((err: Error) => err);
    assert.ok(!(held instanceof Error) && held.status === 409);
    stream.body.destroy();
    const second = new AbortController();
    const replaced = await backend.get({ sessionId }, second.signal);
    assert.equal(replaced.status, 200, 'a destroyed stream is no longer the session\'s');
    second.abort();
    assert.equal(await withDeadline(replaced.body.text(), 5_000, 'the aborted stream ends'), '');
    const third = await backend.get({ sessionId });
    assert.equal(third.status, 200, 'an aborted stream is no longer the session\'s');
    assert.equal((await backend.delete({ sessionId })).status, 200);
    assert.equal(await withDeadline(third.body.text(), 10_000, 'the standalone stream ends'), '');
    assert.equal((await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }), { sessionId })).status, 404);
    await waitForExit(startedPids(logged)[0]!, 10_000);
  });
});

describe('sessions per backend and per user', () => {
  test('beyond bridge.maxSessions initialize gets 503 with a JSON-RPC error; a freed slot is usable again', async () => {
    const { backend } = stdioBackend([FIXTURE], { maxSessions: 1 });
    const first = await open(backend);
    const refused = await read(await backend.post(initializeBody(2), {}));
    assert.equal(refused.status, 503);
    const body = JSON.parse(refused.text) as { id: number; error: { code: number; message: string } };
    assert.deepEqual([body.id, body.error.code], [2, -32010]);
    assert.match(body.error.message, /too many open sessions \(at most 1\)/);
    await backend.delete({ sessionId: first });
    assert.equal(backend.sessionCount, 0);
    const again = await open(backend);
    assert.notEqual(again, first);
  });

  test("past bridge.maxSessionsPerUser a user's initialize gets a JSON-RPC error; other users, and callers naming none, still fit", async () => {
    const { backend } = stdioBackend([FIXTURE], { maxSessions: 3, maxSessionsPerUser: 1 });
    await open(backend, asUser('user-a'));
    const refused = await read(await backend.post(initializeBody(2), asUser('user-a')));
    assert.equal(refused.status, 200);
    assert.match(refused.text, /you have too many open sessions with backend \\"local\\" \(at most 1\)/);
    assert.equal(backend.sessionCount, 1, 'the refusal started nothing');
    await open(backend, asUser('user-b'));
    await open(backend, asUser('not a user key!'));
    assert.equal((await backend.post(initializeBody(5), {})).status, 503, 'three in all: the backend is full');
  });
});

describe('answers as a Streamable HTTP server gives them', () => {
  test("a call's result alone is application/json with its length, the child's own line; progress first makes it SSE", async () => {
    const { backend } = stdioBackend([FIXTURE]);
    const sessionId = await open(backend);
    const echo = await read(await callTool(backend, sessionId, 2, 'echo', { text: 'direct' }));
    assert.equal(echo.contentType, 'application/json');
    assert.equal(echo.length, String(Buffer.byteLength(echo.text)));
    assert.deepEqual(JSON.parse(echo.text), { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'direct' }] } });
    const counted = await read(await callTool(backend, sessionId, 3, 'progress', { steps: 2 }, { progressToken: 'p' }));
    assert.equal(counted.contentType, 'text/event-stream');
    const events = eventDataOf(Buffer.from(counted.text)).map((e) => JSON.parse(e) as { method?: string; id?: number });
    assert.deepEqual(events.map((e) => e.method ?? `response ${e.id}`), ['notifications/progress', 'notifications/progress', 'response 3']);
  });

  test('a pretty-printed request reaches the child as one line; a batch as single messages, answered on one stream', async () => {
    const { backend } = stdioBackend([FIXTURE]);
    const sessionId = await open(backend);
    const pretty = await read(await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 'x\ny', method: 'ping' }, null, 2), { sessionId }));
    assert.deepEqual(JSON.parse(pretty.text), { jsonrpc: '2.0', id: 'x\ny', result: {} });
    const batch = await read(await backend.post(JSON.stringify([{ jsonrpc: '2.0', id: 10, method: 'ping' }, { jsonrpc: '2.0', id: 11, method: 'ping' }]), { sessionId }));
    assert.equal(batch.contentType, 'text/event-stream');
    assert.deepEqual(eventDataOf(Buffer.from(batch.text)).map((e) => (JSON.parse(e) as { id: number }).id).sort(), [10, 11]);
  });
});

describe('cancellation', () => {
  test("a cancelled call's stream ends without a response; the session goes on", async () => {
    const { backend } = stdioBackend([FIXTURE]);
    const sessionId = await open(backend);
    // `sample` asks the client for a completion and waits: the request is open until answered or cancelled.
    const sampling = await withDeadline(callTool(backend, sessionId, 7, 'sample', { prompt: 'never answered' }), 10_000, 'tools/call sample');
    assert.equal(sampling.contentType, 'text/event-stream');
    const chunks: string[] = [];
    const reading = (async () => {
      for await (const chunk of sampling.body) chunks.push(chunk.toString());
    })();
    while (!chunks.join('').includes('sampling/createMessage')) await new Promise((resolve) => setTimeout(resolve, 20));
    const cancelled = await backend.post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'the user gave up' } }), { sessionId });
    assert.equal(cancelled.status, 202);
    await withDeadline(reading, 10_000, 'the cancelled call stream ends');
    const events = eventDataOf(Buffer.from(chunks.join(''))).map((e) => JSON.parse(e) as { method?: string });
    assert.deepEqual(events.map((e) => e.method), ['sampling/createMessage'], 'no response after the cancellation');
    const echo = await read(await callTool(backend, sessionId, 8, 'echo', { text: 'still here' }));
    assert.match(echo.text, /still here/);
  });
});

describe('a child that never answers', () => {
  test("past the backend's timeout the call gets -32011 and the child is told the request is cancelled; the session goes on", async () => {
    const { backend, logged } = stdioBackend([BROKEN, 'silent'], {}, '4s');
    const sessionId = await open(backend);
    const started = Date.now();
    const answer = await read(await withDeadline(callTool(backend, sessionId, 9, 'anything'), 15_000, 'tools/call to a silent child'));
    const error = (JSON.parse(answer.text) as { id: number; error: { code: number; message: string } });
    assert.deepEqual([error.id, error.error.code], [9, -32011]);
    assert.match(error.error.message, /did not answer within 4000 ms/);
    assert.ok(Date.now() - started < 10_000);
    const until = Date.now() + 5_000;
    const told = () => logged.some((r) => r.msg === 'stdio backend stderr' && String(r.stderr).includes('cancelled 9'));
    while (!told() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(told(), 'the child got notifications/cancelled for request 9');
    const pong = await read(await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'ping' }), { sessionId }));
    assert.deepEqual(JSON.parse(pong.text), { jsonrpc: '2.0', id: 10, result: {} });
  });
});

describe('children that break the stdio transport', () => {
  test('lines that are no JSON-RPC message are logged and skipped; the answer after them arrives', async () => {
    const { backend, logged } = stdioBackend([BROKEN, 'garbage']);
    const sessionId = await open(backend);
    const answer = await read(await callTool(backend, sessionId, 2, 'anything'));
    assert.deepEqual(JSON.parse(answer.text), { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'answered after garbage' }] } });
    const skipped = logged.filter((r) => r.msg.includes('not a JSON-RPC message')).map((r) => r.line);
    assert.deepEqual(skipped, ['this is not JSON {', '{"hello":"a JSON object, but no JSON-RPC message"}']);
  });

  test('a line that never ends: the open call gets -32010 once the line passes 16 MiB, and the child is killed', async () => {
    const { backend, logged } = stdioBackend([BROKEN, 'endless-line']);
    const sessionId = await open(backend);
    const before = process.memoryUsage().rss;
    const answer = await read(await withDeadline(callTool(backend, sessionId, 2, 'flood'), 30_000, 'tools/call flood'));
    const error = (JSON.parse(answer.text) as { error: { code: number; message: string } }).error;
    assert.equal(error.code, -32010);
    assert.match(error.message, /session ended: the backend wrote a line longer than 16777216 bytes/);
    await waitForExit(startedPids(logged)[0]!, 10_000);
    assert.equal((await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }), { sessionId })).status, 404);
    const grown = (process.memoryUsage().rss - before) / 2 ** 20;
    assert.ok(grown < 200, `the gateway grew by ${grown.toFixed(0)} MiB`);
  });

  test('a flood of 20,000 messages before the result: all reach the reader, in order, the result last', async () => {
    const { backend } = stdioBackend([BROKEN, 'many-messages']);
    const sessionId = await open(backend);
    const res = await withDeadline(callTool(backend, sessionId, 2, 'flood'), 30_000, 'tools/call flood');
    assert.equal(res.contentType, 'text/event-stream');
    // Read slowly at first: the child is paused meanwhile (backpressure), not buffered without bound.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const events = eventDataOf(Buffer.from(await withDeadline(res.body.text(), 30_000, 'reading the flood')));
    assert.equal(events.length, 20_001);
    assert.match(events[0]!, /"line 0"/);
    assert.match(events.at(-1)!, /answered after 20000 messages/);
  });

  test('a flood nobody listens for (no request open, no GET stream) is dropped; the session still answers', async () => {
    const { backend, logged } = stdioBackend([BROKEN, 'unrelated']);
    const sessionId = await open(backend);
    // Once all are read (a request open meanwhile would carry them: open-requests.ts), ping.
    const dropped = () => logged.filter((r) => r.msg.includes('which is not open; dropped')).length;
    const until = Date.now() + 20_000;
    while (dropped() < 50_000 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(dropped(), 50_000);
    const pong = await read(await withDeadline(backend.post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }), { sessionId }), 30_000, 'ping'));
    assert.deepEqual(JSON.parse(pong.text), { jsonrpc: '2.0', id: 2, result: {} });
  });

  test('a child that crashes mid-call: the call gets -32010 naming the exit, and its stderr is in the log', async () => {
    const { backend, logged } = stdioBackend([BROKEN, 'crash']);
    const sessionId = await open(backend);
    const answer = await read(await withDeadline(callTool(backend, sessionId, 2, 'crash'), 15_000, 'tools/call crash'));
    const error = (JSON.parse(answer.text) as { error: { code: number; message: string } }).error;
    assert.equal(error.code, -32010);
    assert.match(error.message, /backend "local" session ended: the backend process exited \(code 7\)/);
    const ended = logged.find((r) => r.msg === 'bridge session ended by the backend');
    assert.match(String(ended?.stderr), /giving up on this call/);
    assert.equal((await backend.post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }), { sessionId })).status, 404);
  });
});
