/**
 * OpenTelemetry by the MCP semantic conventions, end to end (issue 30 §1): two gateway
 * replicas (the real CLI) on one real redis export to a real OTLP/HTTP receiver process
 * (test/fixtures/otlp-receiver.ts); real SDK backends record the trace context they receive.
 *
 *   weather    2025-11-25 backend (v1 SDK)        behind /mcp
 *   weather26  2026-07-28 backend (server 2.4.0)  the stateless path
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTracedBackend, type TracedBackend } from '../fixtures/traced-backend.js';
import type { Recorded, RecordedSpan } from '../fixtures/otlp-receiver.js';
import { waitUntil } from '../helpers/child.js';
import { withDeadline } from '../helpers/deadline.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { statelessCall, statelessMeta } from '../helpers/stateless-call.js';

const SERVER = 2;
const CLIENT = 3;
const BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];
const T1 = '4bf92f3577b34da6a3ce929d0e0e4736';
const T2 = '5cf92f3577b34da6a3ce929d0e0e4737';
const T3 = '6df92f3577b34da6a3ce929d0e0e4738';
const parentOf = (trace: string, span: string) => `00-${trace}-${span}-01`;

let receiver: FixtureChild | undefined, oauth: OAuthHandle | undefined, redis: RedisHandle | undefined, set: ReplicaSet | undefined;
let weather: TracedBackend | undefined, weather26: TracedBackend | undefined;
let token = '';

before(async () => {
  [receiver, oauth, redis, weather, weather26] = await Promise.all([startFixtureChild('otlp-receiver.ts'), startOAuthServer(), startRedis(), startTracedBackend('legacy'), startTracedBackend('modern')]);
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [
      { name: 'weather', url: weather.url, protocol: '2025-11-25' },
      { name: 'weather26', url: weather26.url, protocol: '2026-07-28' },
    ],
    extra: { telemetry: { otlp: { endpoint: receiver.url } } },
  });
  token = await oauth.token({ sub: 'alice', aud: set.audience, scope: 'mcp' });
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([receiver?.child.stop(), oauth?.stop(), redis?.stop(), weather?.close(), weather26?.close()]);
});

async function recorded(): Promise<Recorded> {
  return (await (await fetch(`${receiver!.url}/recorded`)).json()) as Recorded;
}

/** Waits (bounded: the batch processor exports every 5 s) for spans of `traceId` matching `enough`. */
async function spansOf(traceId: string, enough: (spans: RecordedSpan[]) => boolean): Promise<RecordedSpan[]> {
  return waitUntil(
    async () => {
      const spans = (await recorded()).spans.filter((s) => s.traceId === traceId);
      return enough(spans) ? spans : undefined;
    },
    { what: `spans of trace ${traceId}`, timeoutMs: 20_000, intervalMs: 250 },
  );
}

const one = (spans: RecordedSpan[], kind: number, name: string) => {
  const found = spans.filter((s) => s.kind === kind && s.name === name);
  assert.equal(found.length, 1, `one ${kind === SERVER ? 'SERVER' : 'CLIENT'} span "${name}" in ${JSON.stringify(spans.map((s) => [s.kind, s.name]))}`);
  return found[0]!;
};

test('a tools/call through /mcp on two replicas: SERVER and member CLIENT span in one trace under the client span; context reaches the backend in _meta and header', async () => {
  const transport = new StreamableHTTPClientTransport(new URL(`${set!.replicas[0]!.url}/mcp`), {
    fetch: set!.roundRobinFetch(),
    requestInit: { headers: { Authorization: `Bearer ${token}`, traceparent: parentOf(T1, '00f067aa0ba902b7'), baggage: 'tenant=acme' } },
  });
  const client = new Client({ name: 'telemetry-e2e', version: '1.0.0' });
  await withDeadline(client.connect(transport), 10_000, 'connect /mcp');
  const sessionId = transport.sessionId!;
  const ok = await withDeadline(client.callTool({ name: 'weather__weather', arguments: {} }), 10_000, 'call weather');
  assert.equal(ok.isError, undefined);
  // The next call goes to the other replica (round robin), with its context in _meta (the convention's carrier).
  const failed = await withDeadline(client.callTool({ name: 'weather__broken', arguments: {}, _meta: { traceparent: parentOf(T2, '00f067aa0ba902b8') } }), 10_000, 'call broken');
  assert.equal(failed.isError, true);

  const first = await spansOf(T1, (s) => s.some((x) => x.name === 'tools/call weather__weather') && s.some((x) => x.name === 'tools/call weather'));
  const server = one(first, SERVER, 'tools/call weather__weather');
  const member = one(first, CLIENT, 'tools/call weather');
  assert.equal(server.parentSpanId, '00f067aa0ba902b7', 'the client span is the SERVER span parent');
  assert.equal(member.parentSpanId, server.spanId, 'the CLIENT span is the SERVER span child');
  assert.deepEqual(pick(server.attributes, ['mcp.method.name', 'gen_ai.tool.name', 'gen_ai.operation.name', 'mcp.session.id', 'mcp.protocol.version', 'client.address', 'network.transport', 'network.protocol.name']), {
    'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'weather__weather', 'gen_ai.operation.name': 'execute_tool', 'mcp.session.id': sessionId,
    'mcp.protocol.version': '2025-11-25', 'client.address': '127.0.0.1', 'network.transport': 'tcp', 'network.protocol.name': 'http',
  });
  assert.equal(typeof server.attributes['jsonrpc.request.id'], 'string');
  assert.match(String(server.attributes['enduser.pseudo.id']), /^[\w-]{32}$/, 'the user is a digest');
  assert.ok(!JSON.stringify(server.attributes).includes('alice'), 'never the raw sub');
  assert.equal(server.attributes['error.type'], undefined);
  const port = Number(new URL(weather!.url).port);
  assert.deepEqual(pick(member.attributes, ['mcp.method.name', 'gen_ai.tool.name', 'gen_ai.operation.name', 'switchboard.backend', 'server.address', 'server.port']), {
    'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'weather', 'gen_ai.operation.name': 'execute_tool', 'switchboard.backend': 'weather', 'server.address': '127.0.0.1', 'server.port': port,
  });
  assert.equal(server.resource['service.name'], 'switchboard');

  const [call1, call2] = weather!.calls;
  const sent = parentOf(T1, member.spanId);
  assert.equal(call1?.meta.traceparent, sent, 'the CLIENT span context in params._meta');
  assert.equal(call1?.headers.traceparent, sent, 'and in the traceparent header');
  assert.equal(call1?.meta.baggage, 'tenant=acme', 'baggage goes along');

  // The session continued on the other replica traces too; _meta won over the header, which became a link.
  const second = await spansOf(T2, (s) => s.some((x) => x.name === 'tools/call weather__broken') && s.some((x) => x.name === 'tools/call broken'));
  const server2 = one(second, SERVER, 'tools/call weather__broken');
  const member2 = one(second, CLIENT, 'tools/call broken');
  assert.notEqual(server2.resource['service.instance.id'], server.resource['service.instance.id'], 'served by the other replica');
  assert.equal(server2.parentSpanId, '00f067aa0ba902b8');
  assert.deepEqual(server2.links, [{ traceId: T1, spanId: '00f067aa0ba902b7' }]);
  assert.equal(member2.parentSpanId, server2.spanId);
  for (const span of [server2, member2]) {
    assert.equal(span.attributes['error.type'], 'tool_error');
    assert.equal(span.status.code, 2, 'status ERROR');
  }
  assert.equal(call2?.meta.traceparent, parentOf(T2, member2.spanId));
  assert.equal(call2?.headers.traceparent, parentOf(T2, member2.spanId));

  await transport.terminateSession();
  await client.close();
});

test('the 2026-07-28 stateless path gets its SERVER and CLIENT spans', async () => {
  const answer = await statelessCall({
    endpoint: new URL(`${set!.replicas[1]!.url}/mcp/weather26`),
    token,
    id: 7,
    name: 'weather',
    extra: { _meta: { ...statelessMeta({}), traceparent: parentOf(T3, '00f067aa0ba902b9') } },
  });
  assert.equal(answer.status, 200, JSON.stringify(answer));
  const spans = await spansOf(T3, (s) => s.filter((x) => x.name === 'tools/call weather').length >= 2);
  const server = one(spans, SERVER, 'tools/call weather');
  const member = one(spans, CLIENT, 'tools/call weather');
  assert.equal(server.parentSpanId, '00f067aa0ba902b9');
  assert.equal(member.parentSpanId, server.spanId);
  assert.equal(server.attributes['mcp.protocol.version'], '2026-07-28');
  assert.equal(server.attributes['jsonrpc.request.id'], '7');
  assert.equal(member.attributes['switchboard.backend'], 'weather26');
  assert.equal(weather26!.calls.at(-1)?.meta.traceparent, parentOf(T3, member.spanId));
});

test('the convention histograms arrive, in seconds with its buckets, flushed at SIGTERM', async () => {
  await Promise.all([set!.kill(0, 'SIGTERM'), set!.kill(1, 'SIGTERM')]);
  const { points } = await recorded();
  const names = new Set(points.map((p) => p.metric));
  for (const name of ['mcp.server.operation.duration', 'mcp.client.operation.duration', 'mcp.server.session.duration']) assert.ok(names.has(name), `${name} in ${[...names].join(', ')}`);
  for (const p of points) {
    assert.equal(p.unit, 's');
    assert.deepEqual(p.explicitBounds, BUCKETS);
  }
  const failed = points.find((p) => p.metric === 'mcp.server.operation.duration' && p.attributes['error.type'] === 'tool_error');
  assert.deepEqual(pick(failed?.attributes ?? {}, ['mcp.method.name', 'gen_ai.tool.name', 'gen_ai.operation.name']), { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'weather__broken', 'gen_ai.operation.name': 'execute_tool' });
  assert.ok(points.every((p) => p.attributes['mcp.session.id'] === undefined && p.attributes['jsonrpc.request.id'] === undefined), 'no high-cardinality attribute on a metric');
});

function pick(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, o[k]]));
}
