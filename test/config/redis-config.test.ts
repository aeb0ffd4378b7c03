/**
 * The `redis` block (SPEC §8 "Redis", issue 17): standalone (default), cluster and sentinel,
 * TLS and ACL credentials from `${VAR}`; a setting of the wrong mode, or a mode without what
 * it needs, is an error that names the key.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

const base = {
  publicUrl: 'https://mcp.example.com',
  auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
  backends: [{ name: 'demo', url: 'http://127.0.0.1:9999/mcp' }],
};

const redisOf = (redis: Record<string, unknown>, env: Record<string, string> = {}) => parseConfig({ ...base, redis }, env).redis;

function refused(redis: Record<string, unknown>, key: string, problem: RegExp): void {
  assert.throws(
    () => redisOf(redis),
    (err: unknown) => err instanceof ConfigError && err.key === key && problem.test(err.message),
    `expected a ConfigError on ${key} matching ${problem}`,
  );
}

describe('redis config', () => {
  test('standalone is the default mode and keeps its url', () => {
    assert.deepEqual(redisOf({ url: 'redis://redis:6379/0' }), { mode: 'standalone', url: 'redis://redis:6379/0', keyPrefix: 'sb:', unavailableWait: 5_000 });
  });

  test('cluster: seed nodes, rediss:// for TLS', () => {
    const redis = redisOf({ mode: 'cluster', nodes: ['rediss://redis-0:6379', 'rediss://redis-1:6379'], tls: { ca: '/etc/redis/ca.pem' } });
    assert.deepEqual(redis?.nodes, ['rediss://redis-0:6379', 'rediss://redis-1:6379']);
    assert.equal(redis?.tls?.ca, '/etc/redis/ca.pem');
  });

  test('sentinel: host:port of the sentinels and the master name; credentials from ${VAR}', () => {
    const redis = redisOf(
      { mode: 'sentinel', sentinels: ['sentinel-0:26379', '[::1]:26380'], name: 'mymaster', username: '${REDIS_USER}', password: '${REDIS_PASSWORD}' },
      { REDIS_USER: 'switchboard', REDIS_PASSWORD: 's3cret' },
    );
    assert.deepEqual(redis, { mode: 'sentinel', sentinels: ['sentinel-0:26379', '[::1]:26380'], name: 'mymaster', username: 'switchboard', password: 's3cret', keyPrefix: 'sb:', unavailableWait: 5_000 });
  });

  test('unavailableWait: a duration, 5s by default, 0 to fail at once, at most 60s (issue 45 §1)', () => {
    assert.equal(redisOf({ url: 'redis://r:6379', unavailableWait: '2500ms' })?.unavailableWait, 2_500);
    assert.equal(redisOf({ url: 'redis://r:6379', unavailableWait: 0 })?.unavailableWait, 0);
    assert.equal(redisOf({ url: 'redis://r:6379', unavailableWait: '${WAIT}' }, { WAIT: '10s' })?.unavailableWait, 10_000);
    refused({ url: 'redis://r:6379', unavailableWait: '2 minutes' }, 'redis.unavailableWait', /not a duration/);
    refused({ url: 'redis://r:6379', unavailableWait: '2m' }, 'redis.unavailableWait', /at most 60s/);
  });

  test('TLS with a client certificate in standalone mode', () => {
    const tls = { ca: '/tls/ca.pem', cert: '/tls/client.pem', key: '/tls/client.key', servername: 'redis.internal' };
    assert.deepEqual(redisOf({ url: 'rediss://redis:6380', tls })?.tls, tls);
  });

  test('errors name the key', () => {
    refused({ mode: 'standalone' }, 'redis.url', /required when redis.mode is standalone/);
    refused({ url: 'redis+sentinel://x:26379' }, 'redis.url', /redis:\/\/ or rediss:\/\//);
    refused({ mode: 'cluster' }, 'redis.nodes', /required when redis.mode is cluster/);
    refused({ mode: 'cluster', nodes: ['http://redis:6379'] }, 'redis.nodes[0]', /redis:\/\/ or rediss:\/\//);
    refused({ mode: 'cluster', nodes: ['redis://a:6379'], url: 'redis://a:6379' }, 'redis.url', /only when redis.mode is standalone/);
    refused({ mode: 'cluster', nodes: ['redis://a:6379'], keyPrefix: 'sb{x}:' }, 'redis.keyPrefix', /must not contain \{/);
    refused({ mode: 'sentinel', sentinels: ['s:26379'] }, 'redis.name', /master's name/);
    refused({ mode: 'sentinel', name: 'mymaster' }, 'redis.sentinels', /required/);
    refused({ mode: 'sentinel', name: 'm', sentinels: ['redis://s:26379'] }, 'redis.sentinels[0]', /host:port/);
    refused({ url: 'redis://a:6379', name: 'mymaster' }, 'redis.name', /only when redis.mode is sentinel/);
    refused({ mode: 'replicated', url: 'redis://a:6379' }, 'redis.mode', /standalone/);
    refused({ url: 'rediss://a:6379', tls: { cert: '/c.pem' } }, 'redis.tls.key', /go together/);
    refused({ url: 'rediss://a:6379', tls: { ca: '/ca.pem', verify: false } }, 'redis.tls', /verify/);
  });
});
