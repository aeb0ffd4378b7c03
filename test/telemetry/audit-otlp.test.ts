/**
 * `audit.sink: otlp` (issue 30 §2 "Sinks"; src/telemetry/audit-logs.ts): each audit record
 * reaches a real OTLP/HTTP receiver as a log record — event `switchboard.audit`, the record as
 * its body, the trace id that of the call's SERVER span — and is flushed when the gateway
 * closes; the config refuses the sink without `telemetry`, naming the key.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';
import type { Recorded } from '../fixtures/otlp-receiver.js';
import { withDeadline } from '../helpers/deadline.js';
import { startTelemetryRig, type TelemetryRig } from '../helpers/telemetry-rig.js';

let rig: TelemetryRig | undefined;

/** The client's own trace (W3C Trace Context), sent as `traceparent` on every request. */
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN_ID = '00f067aa0ba902b7';

before(async () => {
  rig = await startTelemetryRig((endpoint) => ({ telemetry: { otlp: { endpoint } }, audit: { sink: 'otlp' }, policy: { rules: [{ name: 'no-broken', effect: 'deny', when: 'mcp.tool.name == "broken"' }] } }));
});

after(async () => {
  await rig?.stop();
});

test('allowed and denied calls reach the receiver as OTLP log records, with the SERVER span trace id', async () => {
  const token = await rig!.token();
  const client = new Client({ name: 'audit-otlp', version: '1.0.0' });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(rig!.gateway.endpoint('weather'), { requestInit: { headers: { Authorization: `Bearer ${token}`, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-01` } } })), 10_000, 'connect');
  await withDeadline(client.callTool({ name: 'weather', arguments: { city: 'Oslo' } }), 10_000, 'call');
  await assert.rejects(client.callTool({ name: 'broken', arguments: {} }));
  await client.close();
  await rig!.closeGateway();

  const { logs, spans } = await rig!.recorded();
  assert.equal(logs.length, 2, JSON.stringify(logs));
  const [allowed, denied] = logs as Array<Recorded['logs'][number] & { body: Record<string, unknown> }>;
  for (const log of [allowed!, denied!]) {
    assert.equal(log.eventName, 'switchboard.audit');
    assert.equal(log.severityNumber, 9, 'INFO');
    assert.equal(log.body.schema, 'switchboard.audit/v1');
    assert.ok(!JSON.stringify(log).includes(token) && !JSON.stringify(log.body).includes('"alice"'), 'no token, no raw sub');
  }
  assert.equal(allowed!.body.decision, 'allow');
  assert.equal(allowed!.body.tool, 'weather');
  assert.equal(allowed!.body.outcome, 'ok');
  assert.match(String(allowed!.body.argumentsSha256), /^[0-9a-f]{64}$/);
  assert.equal(denied!.body.decision, 'deny');
  assert.equal(denied!.body.rule, 'no-broken');
  // The SERVER span continues the client's trace, and each record carries that trace's id.
  const server = spans.find((s) => s.kind === 2 && s.name === 'tools/call weather');
  assert.ok(server, `a SERVER span for the call: ${JSON.stringify(spans.map((s) => [s.kind, s.name]))}`);
  assert.equal(server.traceId, CLIENT_TRACE_ID);
  assert.equal(server.parentSpanId, CLIENT_SPAN_ID);
  assert.equal(allowed!.body.traceId, CLIENT_TRACE_ID, "the audit record's traceId is the SERVER span's");
  assert.equal(denied!.body.traceId, CLIENT_TRACE_ID, "the refused call's record too");
});

test('audit.sink otlp without telemetry is a config error naming the key', () => {
  assert.throws(
    () => parseConfig({ publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp' }, backends: [{ name: 'hr', url: 'https://hr.example.com/mcp' }], audit: { sink: 'otlp' } }),
    (err: unknown) => err instanceof ConfigError && err.key === 'audit.sink' && /telemetry\.otlp\.endpoint/.test(err.message),
  );
});
