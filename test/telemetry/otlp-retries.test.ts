/**
 * When an OTLP export is sent again (src/telemetry/otlp-retries.ts): a scripted transport, a
 * clock that does not sleep, and no jitter (the random draw in the middle of its range), so
 * each wait is known.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ExportResponse, IExporterTransport } from '@opentelemetry/otlp-exporter-base';
import { MAX_RETRIES, RetryingOtlpTransport } from '../../src/telemetry/otlp-retries.js';

/** Answers with `script` in order (its last answer once it runs out); records each timeout it was given. */
class ScriptedTransport implements IExporterTransport {
  readonly timeouts: number[] = [];
  shut = false;
  constructor(private readonly script: ExportResponse[]) {}
  async send(_data: Uint8Array, timeoutMillis: number): Promise<ExportResponse> {
    this.timeouts.push(timeoutMillis);
    return this.script[Math.min(this.timeouts.length - 1, this.script.length - 1)]!;
  }
  shutdown(): void {
    this.shut = true;
  }
}

const RETRYABLE: ExportResponse = { status: 'retryable' };
const SUCCESS: ExportResponse = { status: 'success' };
const NO_JITTER = () => 0.5;

function retrying(script: ExportResponse[]) {
  const inner = new ScriptedTransport(script);
  const waits: number[] = [];
  const transport = new RetryingOtlpTransport(inner, async (ms) => void waits.push(ms), NO_JITTER);
  return { inner, waits, transport };
}

test('retryable answers are sent again after a growing backoff, until one succeeds', async () => {
  const { inner, waits, transport } = retrying([RETRYABLE, RETRYABLE, RETRYABLE, SUCCESS]);
  const result = await transport.send(new Uint8Array(1), 60_000);
  assert.equal(result.status, 'success');
  assert.equal(inner.timeouts.length, 4);
  assert.deepEqual(waits, [1000, 1500, 2250]);
});

test('the collector’s Retry-After is waited instead of the backoff', async () => {
  const { waits, transport } = retrying([{ status: 'retryable', retryInMillis: 3000 }, { status: 'retryable', retryInMillis: 0 }, SUCCESS]);
  assert.equal((await transport.send(new Uint8Array(1), 60_000)).status, 'success');
  assert.deepEqual(waits, [3000, 0]);
});

test(`at most ${MAX_RETRIES} retries, the backoff capped at 5 s; the last answer is returned`, async () => {
  const { inner, waits, transport } = retrying([RETRYABLE]);
  const result = await transport.send(new Uint8Array(1), 600_000);
  assert.equal(result.status, 'retryable');
  assert.equal(inner.timeouts.length, 1 + MAX_RETRIES);
  assert.deepEqual(waits, [1000, 1500, 2250, 3375, 5000]);
});

test('no retry would start past the deadline, and each attempt gets only the time left', async () => {
  const { inner, waits, transport } = retrying([RETRYABLE, RETRYABLE]);
  const result = await transport.send(new Uint8Array(1), 2000);
  assert.equal(result.status, 'retryable');
  // The waits here take no time: 1000 and 1500 ms fit in the 2000 left, 2250 does not.
  assert.deepEqual(waits, [1000, 1500]);
  assert.equal(inner.timeouts.length, 3);
  assert.equal(inner.timeouts[0], 2000);
  assert.ok(inner.timeouts.slice(1).every((t) => t <= 2000 && t >= 1), String(inner.timeouts));
  const late = retrying([{ status: 'retryable', retryInMillis: 10_000 }]);
  assert.equal((await late.transport.send(new Uint8Array(1), 5000)).status, 'retryable');
  assert.deepEqual(late.waits, [], 'a Retry-After beyond the deadline is not waited for');
});

test('a failure is not retried; shutdown reaches the transport', async () => {
  const failure: ExportResponse = { status: 'failure', error: new Error('400') };
  const { inner, waits, transport } = retrying([failure]);
  assert.equal(await transport.send(new Uint8Array(1), 60_000), failure);
  assert.equal(inner.timeouts.length, 1);
  assert.deepEqual(waits, []);
  transport.shutdown();
  assert.ok(inner.shut);
});
