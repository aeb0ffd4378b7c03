/**
 * OpenTelemetry for the gateway (issue 30 §1), by the MCP semantic conventions
 * (`docs/gen-ai/mcp.md` of open-telemetry/semantic-conventions-genai; docs/telemetry.md).
 *
 * This file is all the rest of the gateway imports, and it imports no OpenTelemetry package:
 * without a `telemetry` key the SDK is never loaded (otel-sdk.ts comes in by a dynamic import)
 * and the hot path pays one `if` on `app.telemetry`.
 */
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { CallTrace, TraceHeaders } from '../backends/backend.js';
import type { Config } from '../config/schema.js';
import type { AuditSink } from '../ops/audit.js';
import type { AuditDrops } from '../ops/audit-drops.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';

/** The SERVER span of one client message, from its arrival to the end of its answer. */
export interface ServerScope extends CallTrace {
  /** Ends the span; `failure` is the gateway's own outcome (metrics' `McpOutcome`) when it answered with an error. */
  end(failure?: string): void;
}

/** The CLIENT span of one message the gateway sends a backend. */
export interface ClientScope {
  /** The span's context, to put into the message's `params._meta` and the request's headers. */
  readonly headers: TraceHeaders;
  /** The backend's response to the message: its outcome goes on the span. */
  observe(message: JsonRpcMessage): void;
  /** Ends the span (idempotent); `failure` is the `error.type` when no response came. */
  end(failure?: string): void;
}

/** The backend a CLIENT span goes to: its name (`switchboard.backend`) and URL (`server.address`/`server.port`). */
export interface ClientTarget {
  name: string;
  url?: string;
}

export interface Telemetry {
  /** `recordContent`: a tool's result goes on its span, so answers are read whole, not scanned. */
  readonly recordsContent: boolean;
  server(request: FastifyRequest, message: JsonRpcMessage, backend: string): ServerScope;
  /**
   * `server`: the SERVER span of the call, when there is one. If `parent` is its context, the
   * CLIENT span's parent is taken from it as it is, not parsed back from the text; if it is an
   * unsampled root (`CallTrace.unsampledRoot`), the CLIENT span is none either: nothing to
   * inject, only the histogram.
   */
  client(target: ClientTarget, message: JsonRpcMessage, parent: TraceHeaders, session: { id?: string; protocolVersion?: string }, server?: CallTrace): ClientScope;
  /** A session the client ended: `mcp.server.session.duration`. */
  sessionEnded(createdAt: number, protocolVersion: string | undefined): void;
  /** `audit.sink: otlp`: a sink exporting each audit record as an OTLP log record (audit-logs.ts); `dropped` is told of the records an export lost. */
  auditSink(dropped?: AuditDrops): Promise<AuditSink>;
  /** Exports what is pending and stops (graceful shutdown). */
  shutdown(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Undefined unless the config has `telemetry` (src/telemetry/). */
    telemetry: Telemetry | undefined;
  }
}

let sdkLoaded = false;

/** Whether this process ever loaded the OpenTelemetry SDK (tests: off means not loaded). */
export function telemetrySdkLoaded(): boolean {
  return sdkLoaded;
}

/** Spans the export dropped (span-queue.ts): `switchboard_telemetry_spans_dropped_total` (ops/metrics.ts). */
export type SpansDropped = (reason: 'queue_full' | 'export_failed', count: number) => void;

/** Starts the SDK when `telemetry` is configured; otherwise loads nothing and returns undefined. */
export async function startTelemetry(config: Config, log: FastifyBaseLogger, dropped: SpansDropped = () => {}): Promise<Telemetry | undefined> {
  if (!config.telemetry) return undefined;
  sdkLoaded = true;
  const { createOtelTelemetry } = await import('./otel-sdk.js');
  return createOtelTelemetry(config.telemetry, log, dropped);
}
