/**
 * The `telemetry` config block (issue 30 §1; src/config/telemetry-schema.ts): off when absent,
 * defaults when present, and errors naming the key.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

const base = (more: Record<string, unknown> = {}) => ({
  publicUrl: 'https://mcp.example.com',
  auth: { issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp' },
  backends: [{ name: 'hr', url: 'https://hr.example.com/mcp' }],
  ...more,
});

function fails(telemetry: unknown, key: string, problem: RegExp): void {
  assert.throws(
    () => parseConfig(base({ telemetry })),
    (err: unknown) => err instanceof ConfigError && err.key === key && problem.test(err.message),
  );
}

test('absent: off; present: the defaults', () => {
  assert.equal(parseConfig(base()).telemetry, undefined);
  assert.deepEqual(parseConfig(base({ telemetry: { otlp: { endpoint: 'http://collector:4318' } } })).telemetry, {
    otlp: { endpoint: 'http://collector:4318', headers: {} },
    sampling: { ratio: 1 },
    user: 'digest',
    recordContent: false,
    contentMaxBytes: 4096,
  });
});

test('errors name the key', () => {
  fails({}, 'telemetry.otlp', /Required/);
  fails({ otlp: { endpoint: 'collector:4318' } }, 'telemetry.otlp.endpoint', /URL/i);
  fails({ otlp: { endpoint: 'http://c:4318' }, sampling: { ratio: 2 } }, 'telemetry.sampling.ratio', /between 0 and 1/);
  fails({ otlp: { endpoint: 'http://c:4318' }, user: 'email' }, 'telemetry.user', /digest|sub/);
  fails({ otlp: { endpoint: 'http://c:4318' }, exporter: 'zipkin' }, 'telemetry', /exporter/);
});
