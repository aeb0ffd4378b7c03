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
import type { Recorded } from '../fixtures/otlp-receiver.js';
import { startTracedBackend, type TracedBackend } from '../fixtures/traced-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const TRACE = '7ef92f3577b34da6a3ce929d0e0e4739';
let receiver: FixtureChild | undefined, oauth: OAuthHandle | undefined, redis: RedisHandle | undefined, backend: TracedBackend | undefined;
let gateway: GatewayHandle | undefined;

before(async () => {
  [receiver, oauth, redis, backend] = await Promise.all([startFixtureChild('otlp-receiver.ts'), startOAuthServer(), startRedis(), startTracedBackend('legacy')]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    redisUrl: redis.url,
    backends: [{ name: 'weather', url: backend.url, protocol: '2025-11-25' }],
    overrides: { telemetry: { otlp: { endpoint: receiver.url }, sampling: { ratio: 0 }, user: 'sub', recordContent: true, contentMaxBytes: 64 } },
  });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([receiver?.child.stop(), oauth?.stop(), redis?.stop(), backend?.close()]);
});

test('user: sub, recordContent capped, ratio 0 follows only a sampled client context; close flushes', async () => {
  const token = await oauth!.token({ sub: 'alice', aud: gateway!.audience, scope: 'mcp' });
  const client = new Client({ name: 'telemetry-options', version: '1.0.0' });
  // No trace context on the handshake: ratio 0 records none of it.
  await withDeadline(client.connect(new StreamableHTTPClientTransport(gateway!.endpoint('weather'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, 'connect');
  const city = 'x'.repeat(200);
  await withDeadline(client.callTool({ name: 'weather', arguments: { city }, _meta: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` } }), 10_000, 'call');
  await client.close();
  await gateway!.close();
  gateway = undefined;

  const { spans } = (await (await fetch(`${receiver!.url}/recorded`)).json()) as Recorded;
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
