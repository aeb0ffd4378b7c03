/**
 * Telemetry off (issue 30 §1, "off by default"): without a `telemetry` key the OpenTelemetry
 * SDK is never loaded, and a backend gets the client's trace headers exactly as today and no
 * context in `params._meta`. Real gateway, real redis, real OAuth server, real SDK backend.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { telemetrySdkLoaded } from '../../src/telemetry/telemetry.js';
import { startTracedBackend, type TracedBackend } from '../fixtures/traced-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let oauth: OAuthHandle | undefined, redis: RedisHandle | undefined, gateway: GatewayHandle | undefined, backend: TracedBackend | undefined;

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startTracedBackend('legacy')]);
  gateway = await startGateway({ issuer: oauth.issuer, redisUrl: redis.url, backends: [{ name: 'weather', url: backend.url, protocol: '2025-11-25' }] });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), redis?.stop(), backend?.close()]);
});

test('without telemetry: no SDK loaded, trace headers forwarded as they came, _meta untouched', async () => {
  const token = await oauth!.token({ sub: 'alice', aud: gateway!.audience, scope: 'mcp' });
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const transport = new StreamableHTTPClientTransport(gateway!.endpoint('weather'), { requestInit: { headers: { Authorization: `Bearer ${token}`, traceparent, tracestate: 'rojo=1', baggage: 'tenant=acme' } } });
  const client = new Client({ name: 'telemetry-off', version: '1.0.0' });
  await withDeadline(client.connect(transport), 10_000, 'connect');
  await withDeadline(client.callTool({ name: 'weather', arguments: {}, _meta: { 'example.com/key': 'kept' } }), 10_000, 'call');
  await client.close();
  assert.equal(gateway!.app.telemetry, undefined);
  assert.equal(telemetrySdkLoaded(), false, 'the OpenTelemetry SDK was not imported');
  const [call] = backend!.calls;
  assert.deepEqual(call?.headers, { traceparent, tracestate: 'rojo=1', baggage: undefined }, "today's forwarding: traceparent and tracestate only");
  assert.deepEqual(call?.meta, { 'example.com/key': 'kept' });
});
