/**
 * The quality bar of SPEC §7: the official conformance suite (server mode) passes through
 * Switchboard exactly as it passes against the backend directly. The suite sends no token,
 * so a test-only proxy in front of the gateway adds a real one from a real OAuth server;
 * the product itself has no unauthenticated mode.
 *
 * Runs against both state stores: in-memory and a real Redis.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { formatConformanceTable, runConformance, startConformanceServer, stopConformanceCli, type ConformanceServer, type ScenarioResult } from '../helpers/conformance.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startTokenProxy, type TokenProxy } from '../helpers/token-proxy.js';

/** Runs through the gateway per store; each must pass every scenario that passes directly. */
const RUNS = 5;
let backend: ConformanceServer;
let oauth: OAuthHandle;
let redis: RedisHandle;
let direct: Map<string, ScenarioResult>;

before(async () => {
  [backend, oauth, redis] = await Promise.all([startConformanceServer(), startOAuthServer(), startRedis()]);
  direct = await runConformance(backend.url, { suite: 'all' });
});

after(async () => {
  await Promise.allSettled([stopConformanceCli(), backend?.stop(), oauth?.stop(), redis?.stop()]);
});

/** Starts a gateway in front of the fixture and the token proxy in front of the gateway. */
async function throughGateway(store: 'memory' | 'redis'): Promise<{ gateway: GatewayHandle; proxy: TokenProxy }> {
  // The proxy's port is only known once it listens; its origin must be allowed because the
  // suite sends `Origin: http://<the URL it was given>` on its DNS-rebinding check.
  const gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: 'conformance', url: backend.url, timeout: '30s' }],
    ...(store === 'redis' ? { redisUrl: redis.url } : {}),
  });
  const token = await oauth.token({ sub: `conformance-${store}`, aud: gateway.audience });
  const proxy = await startTokenProxy(gateway.endpoint('conformance').href, token);
  const proxyOrigin = new URL(proxy.url).origin;
  await gateway.close();
  // Restart on the same port with the proxy's origin allowed (config is read once, at start).
  const allowed = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: 'conformance', url: backend.url, timeout: '30s' }],
    ...(store === 'redis' ? { redisUrl: redis.url } : {}),
    port: Number(new URL(gateway.url).port),
    // Five suite runs in a minute exceed the default per-user budget; the limiter is not under test here.
    overrides: { allowedOrigins: [proxyOrigin], limits: { rateLimit: { max: 100_000 } } },
  });
  return { gateway: allowed, proxy };
}

for (const store of ['memory', 'redis'] as const) {
  describe(`conformance through the gateway (${store} store)`, () => {
    test('every scenario that passes directly passes through Switchboard', async () => {
      const { gateway, proxy } = await throughGateway(store);
      try {
        const passingDirectly = [...direct].filter(([, r]) => r.passed).map(([name]) => name);
        assert.ok(passingDirectly.length >= 30, `expected the fixture to pass the suite directly:\n${formatConformanceTable(direct)}`);
        // Several runs: server requests on the standalone stream race the client's own GET,
        // so a gateway that loses them fails some runs, not every one (issue 13).
        for (let run = 1; run <= RUNS; run++) {
          const proxied = await runConformance(proxy.url, { suite: 'all' });
          const regressions = passingDirectly.filter((name) => !proxied.get(name)?.passed);
          assert.deepEqual(regressions, [], `run ${run}: scenarios failing only through the gateway:\n${formatConformanceTable(proxied)}\n${describeFailures(proxied, regressions)}`);
        }
      } finally {
        await proxy.close();
        await gateway.close();
      }
    });
  });
}

function describeFailures(results: Map<string, ScenarioResult>, names: string[]): string {
  return names
    .map((name) => {
      const checks = results.get(name)?.checks.filter((c) => c.status === 'FAILURE') ?? [];
      return `${name}: ${checks.map((c) => `${c.id}: ${c.errorMessage ?? ''}`).join('; ') || 'no result'}`;
    })
    .join('\n');
}
