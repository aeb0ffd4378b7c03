/**
 * Telemetry off (issue 30 §1, "off by default"): without a `telemetry` key the OpenTelemetry
 * SDK is never loaded — a module resolve hook (test/fixtures/import-watch.mjs) sees no module of
 * `@opentelemetry/` resolved, and does see them once telemetry starts — and a backend gets the
 * client's trace headers exactly as today and no context in `params._meta`. Real gateway, real
 * redis, real OAuth server, real SDK backend.
 */
import assert from 'node:assert/strict';
import { register } from 'node:module';
import { after, before, test } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { TracedBackend } from '../fixtures/traced-backend.js';
import { waitUntil } from '../helpers/child.js';
import { withDeadline } from '../helpers/deadline.js';
import type { GatewayHandle } from '../helpers/gateway.js';
import type { OAuthHandle } from '../helpers/oauth.js';
import type { RedisHandle } from '../helpers/redis.js';

// The gateway's modules are imported only after the hook is registered (below), so a static
// import of the SDK anywhere in them would be seen too.
let telemetryModule: typeof import('../../src/telemetry/telemetry.js');
let parseConfig: typeof import('../../src/config/load.js').parseConfig;

let oauth: OAuthHandle | undefined, redis: RedisHandle | undefined, gateway: GatewayHandle | undefined, backend: TracedBackend | undefined;
/** Modules of `@opentelemetry/` resolved since the hook was registered (before any of the gateway's modules). */
const resolved: string[] = [];
const watch = new MessageChannel();

before(async () => {
  watch.port1.on('message', (url: string) => resolved.push(url));
  watch.port1.unref();
  register('../fixtures/import-watch.mjs', import.meta.url, { data: { port: watch.port2 }, transferList: [watch.port2] });
  const [{ startTracedBackend }, { startGateway }, { startOAuthServer }, { startRedis }] = await Promise.all([
    import('../fixtures/traced-backend.js'), import('../helpers/gateway.js'), import('../helpers/oauth.js'), import('../helpers/redis.js'),
  ]);
  telemetryModule = await import('../../src/telemetry/telemetry.js');
  ({ parseConfig } = await import('../../src/config/load.js'));
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
  assert.equal(telemetryModule.telemetrySdkLoaded(), false, 'the OpenTelemetry SDK was not imported');
  assert.deepEqual(resolved, [], 'no @opentelemetry module resolved');
  const [call] = backend!.calls;
  assert.deepEqual(call?.headers, { traceparent, tracestate: 'rojo=1', baggage: undefined }, "today's forwarding: traceparent and tracestate only");
  assert.deepEqual(call?.meta, { 'example.com/key': 'kept' });
});

test('the watch works: starting telemetry resolves the SDK modules', async () => {
  const config = parseConfig({
    publicUrl: gateway!.url,
    auth: { issuer: oauth!.issuer, audience: gateway!.audience },
    backends: [{ name: 'weather', url: backend!.url }],
    telemetry: { otlp: { endpoint: 'http://127.0.0.1:9' } },
  });
  const telemetry = await telemetryModule.startTelemetry(config, gateway!.app.log);
  assert.ok(telemetry);
  await waitUntil(async () => (resolved.some((u) => u.includes('/@opentelemetry/sdk-metrics/')) ? true : undefined), { what: 'the SDK resolved', timeoutMs: 5_000 });
  assert.equal(telemetryModule.telemetrySdkLoaded(), true);
  await telemetry.shutdown();
});
