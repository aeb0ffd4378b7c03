/**
 * `telemetry`: OpenTelemetry traces and metrics by the MCP semantic conventions (issue 30 §1;
 * docs/telemetry.md). Absent, the OpenTelemetry SDK is not even loaded (src/telemetry/).
 */
import { z } from 'zod';
import type { DurationSchema as Duration } from './duration.js';
import { httpUrl } from './http-url.js';

/**
 * `telemetry.spans`: the bounds of the span export queue (src/telemetry/span-queue.ts), the
 * SDK batch processor's `OTEL_BSP_*` settings under the config's own names: how many ended spans
 * wait at most (one more is dropped and counted), how many leave in one export, how long the
 * first waits for its batch, and how long one export may take before its batch is dropped. What
 * a slow or absent collector can cost is the queue, whatever it does.
 */
function spansSchema(duration: Duration) {
  return z
    .object({
      /** Ended spans waiting for export at most; one more is dropped and counted (`queue_full`). */
      queueSize: z.number().int().min(64, 'must be at least 64').max(65536, 'must be at most 65536').default(2048),
      /** Spans in one export; a full batch leaves at once. At most `queueSize`. */
      batchSize: z.number().int().min(1, 'must be at least 1').max(8192, 'must be at most 8192').default(512),
      /** How long the first waiting span waits for its batch to fill. */
      batchDelay: duration('5s').refine((ms) => ms >= 100 && ms <= 60_000, 'must be between 100ms and 60s'),
      /** How long one export may take (retries included); then its batch is dropped and counted (`export_failed`). */
      exportTimeout: duration('10s').refine((ms) => ms >= 1_000 && ms <= 60_000, 'must be between 1s and 60s'),
    })
    .strict()
    .refine((s) => s.batchSize <= s.queueSize, { message: 'must be at most queueSize', path: ['batchSize'] });
}

/** Built with the config's own duration type (schema.ts), which this file cannot import without a cycle. */
export function telemetrySchema(duration: Duration) {
  return z
    .object({
      otlp: z
        .object({
          /** The OTLP/HTTP base URL: traces go to `{endpoint}/v1/traces`, metrics to `{endpoint}/v1/metrics`. */
          endpoint: httpUrl,
          /** Sent with every export (e.g. a collector's API key; use `${VAR}`). */
          headers: z.record(z.string()).default({}),
        })
        .strict(),
      sampling: z
        .object({
          /** Share of new traces recorded (parent-based: a sampled parent is always followed). */
          ratio: z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1').default(1),
        })
        .strict()
        .default({}),
      /** How spans name the user: `digest` (the opaque iss+sub digest, default) or the raw `sub` claim. */
      user: z.enum(['digest', 'sub']).default('digest'),
      /** Record tool arguments and results as span attributes (`gen_ai.tool.call.arguments`/`.result`); off by default. */
      recordContent: z.boolean().default(false),
      /** Longest JSON of arguments or a result recorded with `recordContent`; longer is cut and marked. */
      contentMaxBytes: z.number().int().min(64, 'must be at least 64').max(65536, 'must be at most 65536').default(4096),
      /** The span export queue's bounds (spansSchema). */
      spans: spansSchema(duration).default({}),
    })
    .strict();
}

export type TelemetryConfig = z.infer<ReturnType<typeof telemetrySchema>>;
