/**
 * The `telemetry` config block (issue 30 §1; src/config/telemetry-schema.ts): off when absent,
 * defaults when present, and errors naming the key; `telemetry.spans`, the span queue's bounds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';
import { SPAN_QUEUE_DEFAULTS, spanQueueLimits } from '../../src/telemetry/span-queue.js';

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
    spans: { queueSize: 2048, batchSize: 512, batchDelay: 5_000, exportTimeout: 10_000 },
  });
});

test('telemetry.spans: the span queue as set, its defaults those of span-queue.ts', () => {
  const spans = parseConfig(base({ telemetry: { otlp: { endpoint: 'http://c:4318' }, spans: { queueSize: 256, batchSize: 64, batchDelay: '500ms', exportTimeout: '2s' } } })).telemetry!.spans;
  assert.deepEqual(spanQueueLimits(spans), { maxQueue: 256, batchSize: 64, delayMs: 500, exportTimeoutMs: 2_000 });
  const defaults = parseConfig(base({ telemetry: { otlp: { endpoint: 'http://c:4318' } } })).telemetry!.spans;
  assert.deepEqual(spanQueueLimits(defaults), SPAN_QUEUE_DEFAULTS);
});

test('errors name the key', () => {
  fails({}, 'telemetry.otlp', /Required/);
  fails({ otlp: { endpoint: 'collector:4318' } }, 'telemetry.otlp.endpoint', /URL/i);
  fails({ otlp: { endpoint: 'http://c:4318' }, sampling: { ratio: 2 } }, 'telemetry.sampling.ratio', /between 0 and 1/);
  fails({ otlp: { endpoint: 'http://c:4318' }, user: 'email' }, 'telemetry.user', /digest|sub/);
  fails({ otlp: { endpoint: 'http://c:4318' }, exporter: 'zipkin' }, 'telemetry', /exporter/);
  fails({ otlp: { endpoint: 'http://c:4318' }, spans: { queueSize: 10 } }, 'telemetry.spans.queueSize', /at least 64/);
  fails({ otlp: { endpoint: 'http://c:4318' }, spans: { queueSize: 100, batchSize: 200 } }, 'telemetry.spans.batchSize', /at most queueSize/);
  fails({ otlp: { endpoint: 'http://c:4318' }, spans: { exportTimeout: '90s' } }, 'telemetry.spans.exportTimeout', /between 1s and 60s/);
  fails({ otlp: { endpoint: 'http://c:4318' }, spans: { batchDelay: 'soon' } }, 'telemetry.spans.batchDelay', /not a duration/);
  fails({ otlp: { endpoint: 'http://c:4318' }, spans: { size: 1 } }, 'telemetry.spans', /size/);
});
