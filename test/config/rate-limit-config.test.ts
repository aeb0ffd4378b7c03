/**
 * `limits.rateLimit` (the per-user MCP request rate): defaults, durations and numbers from
 * the YAML or from `${VAR}`, and errors that name the key.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

function minimal(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'demo', url: 'http://127.0.0.1:9999/mcp' }],
    ...extra,
  };
}

function assertConfigError(fn: () => unknown, key: string, problem?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.equal(err.key, key, err.message);
    if (problem) assert.match(err.message, problem);
    return true;
  });
}

describe('limits.rateLimit', () => {
  test('on by default: 600 requests per user per minute', () => {
    const config = parseConfig(minimal());
    assert.deepEqual(config.limits.rateLimit, { enabled: true, max: 600, window: 60_000 });
    assert.equal(config.limits.maxBodyBytes, 4 * 1024 * 1024, 'the other limit keeps its default');
  });

  test('max and window are set in the YAML; a partial block keeps the other defaults', () => {
    const config = parseConfig(parseYaml('publicUrl: https://mcp.example.com\nauth: { issuer: https://idp.example.com, audience: aud }\nlimits:\n  rateLimit: { max: 120, window: 10s }\nbackends: [{ name: demo, url: "http://x.example/mcp" }]\n'));
    assert.deepEqual(config.limits.rateLimit, { enabled: true, max: 120, window: 10_000 });
    assert.deepEqual(parseConfig(minimal({ limits: { rateLimit: { window: '1h' } } })).limits.rateLimit, { enabled: true, max: 600, window: 3_600_000 });
    assert.equal(parseConfig(minimal({ limits: { rateLimit: { enabled: false } } })).limits.rateLimit.enabled, false);
  });

  test('max and window from environment variables', () => {
    const config = parseConfig(minimal({ limits: { rateLimit: { max: '${RL_MAX}', window: '${RL_WINDOW}' } } }), { RL_MAX: '300', RL_WINDOW: '30' });
    assert.deepEqual(config.limits.rateLimit, { enabled: true, max: 300, window: 30_000 });
  });

  test('errors name the key', () => {
    assertConfigError(() => parseConfig(minimal({ limits: { rateLimit: { max: 0 } } })), 'limits.rateLimit.max');
    assertConfigError(() => parseConfig(minimal({ limits: { rateLimit: { max: 2.5 } } })), 'limits.rateLimit.max');
    assertConfigError(() => parseConfig(minimal({ limits: { rateLimit: { window: 'soon' } } })), 'limits.rateLimit.window', /not a duration/);
    assertConfigError(() => parseConfig(minimal({ limits: { rateLimit: { window: '500ms' } } })), 'limits.rateLimit.window', /at least 1s/);
    assertConfigError(() => parseConfig(minimal({ limits: { rateLimit: { enabled: 'yes' } } })), 'limits.rateLimit.enabled');
    assertConfigError(() => parseConfig(minimal({ limits: { rateLimit: { burst: 10 } } })), 'limits.rateLimit', /burst/);
  });
});
