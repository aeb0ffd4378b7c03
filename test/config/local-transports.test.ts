/**
 * stdio and legacy HTTP+SSE backends (SPEC §1 backend side) are bridged per session in the
 * gateway's own memory (src/backends/bridge/), so they are for a single replica only: a
 * config that combines them with `redis` (several replicas sharing state, SPEC §5) is
 * rejected at start, naming the backend's `transport` key.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

function config(backends: unknown[], withRedis: boolean): Record<string, unknown> {
  return {
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    ...(withRedis ? { redis: { url: 'redis://127.0.0.1:6379/0' } } : {}),
    backends,
  };
}

const httpBackend = { name: 'remote', url: 'http://127.0.0.1:9999/mcp' };
const stdioBackend = { name: 'local', transport: 'stdio', command: 'node', args: ['server.js'], env: { TOKEN: 'x' } };
const sseBackend = { name: 'legacy', transport: 'sse', url: 'http://127.0.0.1:9998/sse' };

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected the config to be rejected');
}

describe('stdio and sse backends are single-replica only', () => {
  test('stdio with redis is rejected, naming backends[i].transport and the way out', () => {
    const err = configError(() => parseConfig(config([httpBackend, { ...httpBackend, name: 'remote-two' }, stdioBackend], true)));
    assert.equal(err.key, 'backends[2].transport');
    assert.equal(
      err.message,
      'config: backends[2].transport: stdio backends keep per-session state in this process and cannot be used with redis (multi-replica) state; run a single replica without redis',
    );
  });

  test('sse with redis is rejected the same way', () => {
    const err = configError(() => parseConfig(config([sseBackend], true)));
    assert.equal(err.key, 'backends[0].transport');
    assert.match(err.message, /^config: backends\[0\]\.transport: sse backends keep per-session state in this process and cannot be used with redis/);
    assert.match(err.message, /run a single replica without redis$/);
  });

  test('without redis, stdio and sse backends are accepted with their settings', () => {
    const parsed = parseConfig(config([httpBackend, stdioBackend, sseBackend], false));
    const [, stdio, sse] = parsed.backends;
    assert.equal(stdio!.transport, 'stdio');
    assert.equal(stdio!.command, 'node');
    assert.deepEqual(stdio!.args, ['server.js']);
    assert.deepEqual(stdio!.env, { TOKEN: 'x' });
    assert.equal(sse!.transport, 'sse');
    assert.equal(sse!.url, 'http://127.0.0.1:9998/sse');
  });

  test('streamable-http backends with redis stay accepted', () => {
    const parsed = parseConfig(config([httpBackend], true));
    assert.equal(parsed.backends[0]!.transport, 'streamable-http');
  });
});
