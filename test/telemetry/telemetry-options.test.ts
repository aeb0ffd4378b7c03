/**
 * The `telemetry` options that change what spans hold (issue 30 §1; docs/telemetry.md):
 * `user: sub` names the user by the raw `sub`, `recordContent` records the tool arguments and
 * result capped at `contentMaxBytes`, and `sampling.ratio: 0` records no new trace while a
 * client's sampled context is still followed (parent-based). Closing the gateway flushes the
 * spans (the SIGTERM path). Real gateway, redis, OAuth server, SDK backend and OTLP receiver.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { withDeadline } from '../helpers/deadline.js';
import { startTelemetryRig, type TelemetryRig } from '../helpers/telemetry-rig.js';

const TRACE = '7ef92f3577b34da6a3ce929d0e0e4739';
let rig: TelemetryRig | undefined;

before(async () => {
  rig = await startTelemetryRig((endpoint) => ({ telemetry: { otlp: { endpoint }, sampling: { ratio: 0 }, user: 'sub', recordContent: true, contentMaxBytes: 64 } }));
});

after(async () => {
  await rig?.stop();
});

test('user: sub, recordContent capped, ratio 0 follows only a sampled client context; close flushes', async () => {
  const token = await rig!.token();
  const client = new Client({ name: 'telemetry-options', version: '1.0.0' });
  // No trace context on the handshake: ratio 0 records none of it.
  await withDeadline(client.connect(new StreamableHTTPClientTransport(rig!.gateway.endpoint('weather'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, 'connect');
  const city = 'x'.repeat(200);
  await withDeadline(client.callTool({ name: 'weather', arguments: { city }, _meta: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` } }), 10_000, 'call');
  await client.close();
  await rig!.closeGateway();

  const { spans } = await rig!.recorded();
  assert.deepEqual([...new Set(spans.map((s) => s.traceId))], [TRACE], 'only the sampled client context was followed');
  const server = spans.find((s) => s.kind === 2)!;
  const member = spans.find((s) => s.kind === 3)!;
  assert.equal(server.name, 'tools/call weather');
  assert.equal(server.attributes['user.id'], 'alice');
  assert.equal(server.attributes['enduser.pseudo.id'], undefined);
  const args = JSON.stringify({ city });
  assert.equal(server.attributes['gen_ai.tool.call.arguments'], `${args.slice(0, 64)}…[truncated]`);
  assert.equal(member.attributes['gen_ai.tool.call.arguments'], `${args.slice(0, 64)}…[truncated]`);
  for (const span of [server, member]) assert.equal(span.attributes['gen_ai.tool.call.result'], JSON.stringify({ content: [{ type: 'text', text: 'sunny' }] }), 'under the cap: whole');
});
