/**
 * When an OTLP export is sent again (OTLP/HTTP "Retrying": https://opentelemetry.io/docs/specs/otlp/#retryable-response-codes),
 * as the SDK's exporters retry: after a retryable answer or connection failure
 * (otlp-undici-transport.ts), up to {@link MAX_RETRIES} more attempts, each after the
 * `Retry-After` the collector asked for or else an exponential backoff with jitter, and none that
 * would start past the export's deadline (its timeout, counted from the first attempt). The span
 * queue sends one export at a time and drops what does not fit while it waits (span-queue.ts), so
 * retries never hold a call.
 */
import type { ExportResponse, IExporterTransport } from '@opentelemetry/otlp-exporter-base';

export const MAX_RETRIES = 5;
const FIRST_BACKOFF_MS = 1000;
const BACKOFF_MULTIPLIER = 1.5;
const MAX_BACKOFF_MS = 5000;
/** A backoff is moved by up to this share either way, so replicas that failed together do not retry together. */
const JITTER = 0.2;

/** How a retry waits; tests give their own clock. */
export type Wait = (ms: number) => Promise<void>;

const timerWait: Wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class RetryingOtlpTransport implements IExporterTransport {
  constructor(
    private readonly inner: IExporterTransport,
    private readonly wait: Wait = timerWait,
    private readonly random: () => number = Math.random,
  ) {}

  async send(data: Uint8Array, timeoutMillis: number): Promise<ExportResponse> {
    const deadline = Date.now() + timeoutMillis;
    let result = await this.inner.send(data, timeoutMillis);
    let backoff = FIRST_BACKOFF_MS;
    for (let retries = 0; result.status === 'retryable' && retries < MAX_RETRIES; retries++) {
      const jittered = Math.min(backoff * (1 + (this.random() * 2 - 1) * JITTER), MAX_BACKOFF_MS);
      backoff *= BACKOFF_MULTIPLIER;
      const delay = Math.max(0, result.retryInMillis ?? jittered);
      if (delay >= deadline - Date.now()) return result;
      await this.wait(delay);
      result = await this.inner.send(data, Math.max(1, deadline - Date.now()));
    }
    return result;
  }

  shutdown(): void {
    this.inner.shutdown();
  }
}
