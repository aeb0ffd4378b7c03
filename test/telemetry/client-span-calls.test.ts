/**
 * The CLIENT spans of one POST (src/telemetry/client-span-backend.ts): each request's span ends
 * with the response of its id, a notification's with the backend's acceptance, and what the
 * answer never answers when it is over — for one request, and for a 2025-03-26 batch, whose
 * further requests are kept apart from the first (issue 44 part 1: one request needs no `Map`).
 * The backend is a recording stand-in for the Streamable HTTP client, the telemetry a recording
 * stand-in for the SDK's spans: what is checked is which span ends how.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import type { BackendConfig } from '../../src/config/schema.js';
import { ClientSpanBackend } from '../../src/telemetry/client-span-backend.js';
import type { ClientScope, Telemetry } from '../../src/telemetry/telemetry.js';
import type { JsonRpcMessage } from '../../src/wire/jsonrpc.js';

/** What became of one CLIENT span. */
interface Ended {
  method: string;
  id?: unknown;
  outcome?: unknown;
  failure?: string;
  ends: number;
}

function recordingTelemetry(recordsContent = false): { telemetry: Telemetry; spans: Ended[] } {
  const spans: Ended[] = [];
  const client = (_target: unknown, message: JsonRpcMessage): ClientScope => {
    const span: Ended = { method: message.method!, id: message.id, ends: 0 };
    spans.push(span);
    return {
      headers: { traceparent: `00-${'1'.repeat(32)}-${String(spans.length).padStart(16, '0')}-01` },
      observe: (m) => void (span.outcome = m.error ? m.error.code : m.result ? 'ok' : undefined),
      end: (failure) => {
        span.ends += 1;
        span.failure ??= failure;
      },
    };
  };
  const unused = () => {
    throw new Error('not used by the CLIENT span face');
  };
  return { telemetry: { recordsContent, client, server: unused, sessionEnded: unused, auditSink: unused, shutdown: unused }, spans };
}

/** A backend answering every POST with `answer` as JSON (or failing), keeping what it was sent. */
function answering(answer: string | Error): { backend: McpBackend; sent: string[] } {
  const sent: string[] = [];
  const backend: McpBackend = {
    name: 'b',
    config: { url: 'http://127.0.0.1:9/mcp' } as BackendConfig,
    post: async (body: string, _headers: BackendCallHeaders): Promise<BackendResponse> => {
      sent.push(body);
      if (answer instanceof Error) throw answer;
      return { status: 200, headers: { 'content-length': String(Buffer.byteLength(answer)) }, contentType: 'application/json', body: syntheticBody(answer) };
    },
    get: async () => {
      throw new Error('no GET');
    },
    delete: async () => {
      throw new Error('no DELETE');
    },
    close: async () => {},
  };
  return { backend, sent };
}

const call = (id: unknown, name = 'echo') => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });

test('one request: its span ends once, with the response of its id', async () => {
  const { telemetry, spans } = recordingTelemetry();
  const { backend, sent } = answering('{"result":{"content":[]},"jsonrpc":"2.0","id":7}');
  const res = await new ClientSpanBackend(backend, telemetry).post(JSON.stringify(call(7)), {});
  assert.equal(await res.body.text(), '{"result":{"content":[]},"jsonrpc":"2.0","id":7}');
  // A response that cannot hold an error is not read for one (the span's observe keeps nothing of it): the span ends as the answer does.
  assert.deepEqual(spans, [{ method: 'tools/call', id: 7, failure: undefined, ends: 1 }]);
  assert.match(sent[0]!, /"_meta":\{"traceparent":"00-1{32}-0{15}1-01"/, 'the span context goes in the request');
});

test('one request answered with an error, or a tool\'s error: its span is told it', async () => {
  for (const [answer, outcome] of [
    ['{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Unknown tool"}}', -32602],
    ['{"result":{"content":[],"isError":true},"jsonrpc":"2.0","id":7}', 'ok'],
    ['{"jsonrpc":"2.0","id":7,"\\u0065rror":{"code":-32603,"message":"spelled with an escape"}}', -32603],
  ] as const) {
    const { telemetry, spans } = recordingTelemetry();
    const { backend } = answering(answer);
    await (await new ClientSpanBackend(backend, telemetry).post(JSON.stringify(call(7)), {})).body.text();
    assert.deepEqual(spans, [{ method: 'tools/call', id: 7, outcome, failure: undefined, ends: 1 }], answer);
  }
});

test('a response is its request\'s only by an id of the same type: "7" does not answer 7, in a POST of one request or a batch', async () => {
  for (const body of [JSON.stringify(call(7)), JSON.stringify([call(7), call('x')])]) {
    const { telemetry, spans } = recordingTelemetry();
    const answer = '{"jsonrpc":"2.0","id":"7","error":{"code":-32602,"message":"for another request"}}';
    const { backend } = answering(answer);
    await (await new ClientSpanBackend(backend, telemetry).post(body, {})).body.text();
    // Each span ends when the answer does, told no outcome: the error answered no request of the POST.
    assert.deepEqual(spans[0], { method: 'tools/call', id: 7, failure: undefined, ends: 1 }, body);
  }
});

test('with the result recorded (recordContent), a response without an error is told too', async () => {
  const { telemetry, spans } = recordingTelemetry(true);
  const { backend } = answering('{"result":{"content":[]},"jsonrpc":"2.0","id":7}');
  await (await new ClientSpanBackend(backend, telemetry).post(JSON.stringify(call(7)), {})).body.text();
  assert.deepEqual(spans, [{ method: 'tools/call', id: 7, outcome: 'ok', failure: undefined, ends: 1 }]);
});

test('a batch: each request ends with its own response, a notification with the POST, an unanswered one at the end', async () => {
  const { telemetry, spans } = recordingTelemetry();
  const answer = JSON.stringify([
    { jsonrpc: '2.0', id: 'b', error: { code: -32601, message: 'no' } },
    { jsonrpc: '2.0', id: 1, result: {} },
    { jsonrpc: '2.0', id: 'unknown', result: {} },
  ]);
  const { backend } = answering(answer);
  const batch = [call(1), { jsonrpc: '2.0', method: 'notifications/progress', params: {} }, call('b'), call(3)];
  const res = await new ClientSpanBackend(backend, telemetry).post(JSON.stringify(batch), {});
  assert.equal(await res.body.text(), answer);
  assert.deepEqual(spans, [
    { method: 'tools/call', id: 1, outcome: 'ok', failure: undefined, ends: 1 },
    { method: 'notifications/progress', id: undefined, failure: undefined, ends: 1 },
    { method: 'tools/call', id: 'b', outcome: -32601, failure: undefined, ends: 1 },
    { method: 'tools/call', id: 3, failure: undefined, ends: 1 },
  ]);
});

test('a backend that cannot be reached ends every span of the POST with the failure', async () => {
  const { telemetry, spans } = recordingTelemetry();
  const { backend } = answering(Object.assign(new Error('refused'), { failure: 'connect_failed' }));
  const batch = [call(1), call(2), { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }];
  await assert.rejects(new ClientSpanBackend(backend, telemetry).post(JSON.stringify(batch), {}), /refused/);
  assert.deepEqual(
    spans.map((s) => [s.id, s.failure, s.ends]),
    [
      [1, 'connect_failed', 1],
      [2, 'connect_failed', 1],
      [undefined, 'connect_failed', 1],
    ],
  );
});
