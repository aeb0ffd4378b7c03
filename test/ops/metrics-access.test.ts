/**
 * Who may read `/metrics` (src/ops/metrics-route.ts, metrics-listener.ts; SPEC §8, issue 13):
 * by default anyone on the main port, as before; with `metrics.bearerToken` only a scrape
 * with `Authorization: Bearer <token>` (401 and a challenge otherwise); with `metrics.listen`
 * only on a listener of its own (the main port answers 404), with the token there too when
 * set. Real gateways in-process; the backend is never called.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { ConfigInput } from '../../src/config/schema.js';
import { metricsAccess } from '../../src/ops/metrics-route.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';

const TOKEN = 'scrape-token-0123456789abcdef';
const REQUEST_MS = 5_000;
const gateways: GatewayHandle[] = [];

after(async () => {
  await Promise.allSettled(gateways.map((g) => g.close()));
});

async function gateway(metrics?: ConfigInput['metrics']): Promise<GatewayHandle> {
  const g = await startGateway({
    // Never contacted: no MCP request is made.
    issuer: 'http://127.0.0.1:9/issuer',
    backends: [{ name: 'unused', url: 'http://127.0.0.1:9/mcp' }],
    overrides: metrics ? { metrics } : {},
  });
  gateways.push(g);
  return g;
}

async function scrape(url: string, authorization?: string): Promise<{ status: number; text: string; challenge: string | null }> {
  const res = await fetch(`${url}/metrics`, { headers: authorization ? { authorization } : {}, signal: AbortSignal.timeout(REQUEST_MS) });
  return { status: res.status, text: await res.text(), challenge: res.headers.get('www-authenticate') };
}

const PROMETHEUS_TEXT = /^# HELP switchboard_/m;

describe('/metrics access', () => {
  test('by default open on the main port, as before', async () => {
    const g = await gateway();
    const res = await scrape(g.url);
    assert.equal(res.status, 200);
    assert.match(res.text, PROMETHEUS_TEXT);
  });

  test('metrics.bearerToken: only a scrape with that bearer token is answered', async () => {
    const g = await gateway({ bearerToken: TOKEN });
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${TOKEN}x`, `Basic ${TOKEN}`, `Bearer ${TOKEN.slice(0, -1)}`]) {
      const res = await scrape(g.url, authorization);
      assert.equal(res.status, 401, String(authorization));
      assert.equal(res.challenge, 'Bearer realm="metrics"');
      assert.doesNotMatch(res.text, PROMETHEUS_TEXT);
    }
    const ok = await scrape(g.url, `Bearer ${TOKEN}`);
    assert.equal(ok.status, 200);
    assert.match(ok.text, PROMETHEUS_TEXT);
    assert.equal((await fetch(`${g.url}/healthz`)).status, 200, 'the probes need no token');
  });

  test('metrics.listen: served on its own port only, with the token when one is set', async () => {
    const port = await freePort();
    const g = await gateway({ listen: { host: '127.0.0.1', port }, bearerToken: TOKEN });
    const metricsUrl = `http://127.0.0.1:${port}`;
    assert.equal((await scrape(g.url, `Bearer ${TOKEN}`)).status, 404, 'not on the main port');
    assert.equal((await scrape(metricsUrl)).status, 401);
    const ok = await scrape(metricsUrl, `Bearer ${TOKEN}`);
    assert.equal(ok.status, 200);
    assert.match(ok.text, PROMETHEUS_TEXT);
    assert.equal((await fetch(`${metricsUrl}/healthz`)).status, 404, 'nothing else there');
    await g.close();
    await assert.rejects(fetch(`${metricsUrl}/metrics`, { signal: AbortSignal.timeout(REQUEST_MS) }), 'closed with the gateway');
  });

  test('the token comparison', () => {
    const admits = metricsAccess(TOKEN);
    assert.equal(admits(`Bearer ${TOKEN}`), true);
    assert.equal(admits(`bearer  ${TOKEN}`), true, 'the scheme is case-insensitive (RFC 7235 §2.1)');
    assert.equal(admits(undefined), false);
    assert.equal(admits('Bearer '), false);
    assert.equal(metricsAccess(undefined)(undefined), true);
  });
});
