/**
 * Anonymous registration cannot fill Redis (issue 28 §4): `POST /oauth2/register` takes a
 * bounded document, a bounded number per client address and in total, and a registration
 * that never obtains a token is kept hours, not `refreshTokenTtl` (30 days). The client
 * address is the socket's, or with `listen.trustProxy` the one the trusted proxy appended to
 * X-Forwarded-For (behind an Ingress every request comes from the Ingress).
 *
 * Real gateways (in process) on a real Redis; each scenario has its own gateway, so its own
 * key prefix and counts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { RedisKeys } from '../../src/state/redis-keys.js';
import { ValueKeys } from '../../src/state/value-keys.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { ecPem } from './support.js';

let oauth: OAuthHandle;
let everything: EverythingHandle;
let redis: RedisHandle;
let raw: Redis;
const KEY = ecPem();
const gateways: GatewayHandle[] = [];

before(async () => {
  [oauth, everything, redis] = await Promise.all([startOAuthServer(), startEverything(), startRedis()]);
  raw = new Redis(redis.url);
});

after(async () => {
  await Promise.allSettled(gateways.map((g) => g.close()));
  raw?.disconnect();
  await Promise.allSettled([everything?.stop(), oauth?.stop(), redis?.stop()]);
});

async function startBroker(options: { registrationLimits?: Record<string, unknown>; trustProxy?: string[] } = {}): Promise<GatewayHandle> {
  const port = await freePort();
  const gateway = await startGateway({
    port,
    issuer: oauth.issuer,
    redisUrl: redis.url,
    backends: [{ name: 'everything', url: everything.url }],
    overrides: {
      listen: { host: '127.0.0.1', port, ...(options.trustProxy !== undefined ? { trustProxy: options.trustProxy } : {}) },
      auth: {
        mode: 'broker',
        issuer: oauth.issuer,
        audience: `http://127.0.0.1:${port}/mcp`,
        login: { clientId: 'switchboard' },
        broker: { signingKeys: [KEY], ...(options.registrationLimits ? { registrationLimits: options.registrationLimits } : {}) },
      },
      secrets: { cookieKey: 'c'.repeat(40), tokenKey: 't'.repeat(40) },
    },
  });
  gateways.push(gateway);
  return gateway;
}

const METADATA = { client_name: 'Limits Client', redirect_uris: ['http://127.0.0.1:9/callback'], token_endpoint_auth_method: 'none' };

async function register(gateway: GatewayHandle, body: unknown = METADATA, headers: Record<string, string> = {}) {
  const res = await fetch(`${gateway.url}/oauth2/register`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text.startsWith('{') ? JSON.parse(text) : {}) as Record<string, unknown> };
}

describe('bounded metadata', () => {
  let gateway: GatewayHandle;
  before(async () => {
    gateway = await startBroker();
  });

  test('an ordinary MCP client registration is taken', async () => {
    const res = await register(gateway);
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });

  test('a document over 8 KiB is refused (413), even as padding in a field the provider would drop', async () => {
    const res = await register(gateway, { ...METADATA, x_padding: 'p'.repeat(9 * 1024) });
    assert.equal(res.status, 413);
  });

  test('a field over 2,048 characters, a list over 10 values, a nested object: invalid_client_metadata naming the field', async () => {
    for (const [field, value] of [
      ['client_name', 'n'.repeat(2049)],
      ['redirect_uris', Array.from({ length: 11 }, (_, i) => `http://127.0.0.1:9/cb${i}`)],
      ['contacts', [{ email: 'a@example.com' }]],
      ['software_statement_extra', { a: 1 }],
    ] as const) {
      const res = await register(gateway, { ...METADATA, [field]: value });
      assert.equal(res.status, 400, field);
      assert.equal(res.body.error, 'invalid_client_metadata', field);
      assert.match(String(res.body.error_description), new RegExp(field), field);
    }
  });
});

describe('a registration that never obtains a token', () => {
  test('is kept unusedClientTtl in Redis, not refreshTokenTtl', async () => {
    const gateway = await startBroker({ registrationLimits: { unusedClientTtl: '2h' } });
    const res = await register(gateway);
    assert.equal(res.status, 201);
    const key = `sbtest${new URL(gateway.url).port}:${new RedisKeys(false).value(ValueKeys.brokerRecord('Client', String(res.body.client_id)))}`;
    const pttl = await raw.pttl(key);
    assert.ok(pttl > 0 && pttl <= 2 * 3_600_000, `kept at most 2 h (PTTL ${pttl} ms)`);
  });
});

describe('per-address limit', () => {
  test('past perAddress in a window: 429 with Retry-After, nothing stored', async () => {
    const gateway = await startBroker({ registrationLimits: { perAddress: 3, window: '1m' } });
    for (let i = 0; i < 3; i++) assert.equal((await register(gateway)).status, 201, `registration ${i + 1}`);
    const refused = await register(gateway);
    assert.equal(refused.status, 429);
    assert.equal(refused.body.error, 'temporarily_unavailable');
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After within the window (${retryAfter})`);
  });

  test('with listen.trustProxy, the address is the one the trusted proxy appended to X-Forwarded-For', async () => {
    // The test's requests come from 127.0.0.1: that is the proxy here.
    const gateway = await startBroker({ registrationLimits: { perAddress: 2, window: '1m' }, trustProxy: ['127.0.0.1/32'] });
    // The client's own X-Forwarded-For entries (left) are not believed; the proxy's (right) is.
    const from = (client: string) => ({ 'x-forwarded-for': `198.51.100.77, ${client}` });
    for (let i = 0; i < 2; i++) assert.equal((await register(gateway, METADATA, from('203.0.113.1'))).status, 201);
    assert.equal((await register(gateway, METADATA, from('203.0.113.1'))).status, 429, 'that client is over its limit');
    assert.equal((await register(gateway, METADATA, from('203.0.113.2'))).status, 201, 'another client behind the same proxy is not');
  });

  test('an IPv6 client counts by its /64 (issue 41 §7), an IPv4-mapped address as the IPv4 address', async () => {
    const gateway = await startBroker({ registrationLimits: { perAddress: 2, window: '1m' }, trustProxy: ['127.0.0.1/32'] });
    const from = (client: string) => ({ 'x-forwarded-for': client });
    assert.equal((await register(gateway, METADATA, from('2001:db8:1:2::a'))).status, 201);
    assert.equal((await register(gateway, METADATA, from('2001:db8:1:2::b'))).status, 201);
    assert.equal((await register(gateway, METADATA, from('2001:db8:1:2:ffff:ffff:ffff:c'))).status, 429, 'a third address of the same /64 is over the limit');
    assert.equal((await register(gateway, METADATA, from('2001:db8:1:3::a'))).status, 201, 'the next /64 is another client');
    assert.equal((await register(gateway, METADATA, from('203.0.113.50'))).status, 201);
    assert.equal((await register(gateway, METADATA, from('::ffff:203.0.113.50'))).status, 201);
    assert.equal((await register(gateway, METADATA, from('203.0.113.50'))).status, 429, 'the IPv4-mapped spelling counted as the same client');
  });

  test('registrationLimits.ipv6Prefix sets the network: 128 counts each IPv6 address alone', async () => {
    const gateway = await startBroker({ registrationLimits: { perAddress: 1, window: '1m', ipv6Prefix: 128 }, trustProxy: ['127.0.0.1/32'] });
    for (const client of ['2001:db8:1:2::a', '2001:db8:1:2::b']) assert.equal((await register(gateway, METADATA, { 'x-forwarded-for': client })).status, 201, client);
    assert.equal((await register(gateway, METADATA, { 'x-forwarded-for': '2001:db8:1:2::a' })).status, 429);
  });

  test('without listen.trustProxy, X-Forwarded-For is ignored: the socket\'s address counts', async () => {
    const gateway = await startBroker({ registrationLimits: { perAddress: 2, window: '1m' } });
    for (let i = 0; i < 2; i++) assert.equal((await register(gateway, METADATA, { 'x-forwarded-for': `203.0.113.${10 + i}` })).status, 201);
    assert.equal((await register(gateway, METADATA, { 'x-forwarded-for': '203.0.113.99' })).status, 429, 'a forged header does not buy another budget');
  });
});

describe('total bound', () => {
  test('past total registrations per unusedClientTtl from all addresses: 503 with Retry-After', async () => {
    const gateway = await startBroker({ registrationLimits: { perAddress: 100, total: 4, unusedClientTtl: '1h' }, trustProxy: ['loopback'] });
    for (let i = 0; i < 4; i++) assert.equal((await register(gateway, METADATA, { 'x-forwarded-for': `203.0.113.${i}` })).status, 201);
    const refused = await register(gateway, METADATA, { 'x-forwarded-for': '203.0.113.200' });
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error, 'temporarily_unavailable');
    assert.match(String(refused.body.error_description), /registration is closed for now/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
  });
});
