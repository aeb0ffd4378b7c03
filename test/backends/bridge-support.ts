/**
 * What the stdio and legacy SSE bridge tests share: an official SDK client on
 * `/mcp/{backend}` (Streamable HTTP, real bearer token) that can answer sampling requests,
 * and the round of MCP traffic both kinds of backend must carry through the gateway.
 */
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, McpError, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { withDeadline } from '../helpers/deadline.js';
import { GREETING_TEXT } from '../fixtures/bridge-backend-tools.js';

export interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The sampling requests the client was asked, by prompt text. */
  sampled: string[];
  close(): Promise<void>;
}

/** Connects (initialize + initialized) within 15 s; the caller closes it. */
export async function connectClient(url: URL, token: string, track: Connected[]): Promise<Connected> {
  const client = new Client({ name: 'bridge-test', version: '1.0.0' }, { capabilities: { sampling: {} } });
  const sampled: string[] = [];
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    const first = request.params.messages[0]?.content;
    const prompt = first && !Array.isArray(first) && first.type === 'text' ? first.text : '';
    sampled.push(prompt);
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `reply to ${prompt}` } };
  });
  client.onerror = () => {};
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    // An ended session makes the standalone GET stream end; do not let reconnects run on.
    reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 1 },
  });
  const connected: Connected = { client, transport, sampled, close: () => client.close().catch(() => {}) };
  track.push(connected);
  await withDeadline(client.connect(transport), 15_000, 'client.connect');
  return connected;
}

export function textOf(result: unknown): string {
  return ((result as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

/** Runs `operation`, expecting it to reject within `ms`; returns the error and how long it took. */
export async function failure(operation: () => Promise<unknown>, ms: number, what: string): Promise<{ error: unknown; elapsed: number }> {
  const started = Date.now();
  try {
    const value = await withDeadline(operation(), ms, what);
    assert.fail(`${what} succeeded: ${JSON.stringify(value)}`);
  } catch (error) {
    if (error instanceof assert.AssertionError) throw error;
    return { error, elapsed: Date.now() - started };
  }
}

export function assertMcpError(error: unknown, code: number, message?: RegExp): asserts error is McpError {
  assert.ok(error instanceof McpError, `expected an McpError ${code}, got ${String((error as Error)?.stack ?? error)}`);
  assert.equal(error.code, code, `McpError code (message: ${error.message})`);
  if (message) assert.match(error.message, message);
}

/**
 * Sends `probe` until the gateway answers 404 (session ended), at most `attempts` times,
 * 200 ms apart: the backend's end reaches the gateway asynchronously.
 */
export async function expectSessionEnded(probe: () => Promise<unknown>, attempts = 25): Promise<void> {
  let last: unknown;
  for (let i = 0; i < attempts; i++) {
    try {
      await withDeadline(probe(), 10_000, 'probe request');
      last = new Error('the request succeeded');
    } catch (error) {
      last = error;
      if (error instanceof StreamableHTTPError && error.code === 404) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.fail(`expected HTTP 404 (session ended), last outcome: ${String((last as Error)?.message ?? last)}`);
}

/** tools/list, tools/call, progress, a sampling round trip and resources/read through the gateway. */
export async function exerciseBackend(session: Connected): Promise<void> {
  const { client } = session;
  const tools = await withDeadline(client.listTools(), 10_000, 'tools/list');
  assert.deepEqual(tools.tools.map((t) => t.name).sort(), ['echo', 'process-info', 'progress', 'sample']);

  const echo = await withDeadline(client.callTool({ name: 'echo', arguments: { text: 'hello through the bridge' } }), 10_000, 'tools/call echo');
  assert.equal(textOf(echo), 'hello through the bridge');

  const progress: Progress[] = [];
  const counted = await withDeadline(
    client.callTool({ name: 'progress', arguments: { steps: 3 } }, undefined, { onprogress: (p) => void progress.push(p) }),
    10_000,
    'tools/call progress',
  );
  assert.equal(textOf(counted), 'done 3 steps');
  assert.deepEqual(
    progress.map((p) => [p.progress, p.total, p.message]),
    [
      [1, 3, 'step 1'],
      [2, 3, 'step 2'],
      [3, 3, 'step 3'],
    ],
  );

  const sampled = await withDeadline(client.callTool({ name: 'sample', arguments: { prompt: 'what is a bridge?' } }), 10_000, 'tools/call sample');
  assert.equal(textOf(sampled), 'sampled: reply to what is a bridge?');
  assert.deepEqual(session.sampled, ['what is a bridge?']);

  const resource = await withDeadline(client.readResource({ uri: 'fixture://greeting' }), 10_000, 'resources/read');
  assert.deepEqual(resource.contents, [{ uri: 'fixture://greeting', mimeType: 'text/plain', text: GREETING_TEXT }]);

  assert.deepEqual(await withDeadline(client.ping(), 5_000, 'ping'), {});
}
