/**
 * `telemetry`: OpenTelemetry traces and metrics by the MCP semantic conventions (issue 30 §1;
 * docs/telemetry.md). Absent, the OpenTelemetry SDK is not even loaded (src/telemetry/).
 */
import { z } from 'zod';
import { httpUrl } from './http-url.js';

export const telemetrySchema = z
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
  })
  .strict();

export type TelemetryConfig = z.infer<typeof telemetrySchema>;
