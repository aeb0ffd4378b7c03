/**
 * Prometheus metrics (SPEC §6) on one registry per app. Labels are low-cardinality by
 * construction: routes are templates, backends are configured names, MCP methods are the
 * spec's method names (anything else counts as "other"), and no user or session id is ever
 * a label.
 */
// The module's `performance`, not the global one: `globalThis.performance` is a getter, about 180 instructions a read (issue 44).
import { performance } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { StoreWaitListener, StoreWaitOutcome } from '../state/store-waits.js';
import { HotCounter, HotHistogram } from './hot-metrics.js';

/** Methods of MCP 2025-11-25 (schema reference); others are labelled "other". */
const KNOWN_METHODS = new Set([
  'initialize', 'ping', 'tools/list', 'tools/call', 'prompts/list', 'prompts/get', 'resources/list', 'resources/read',
  'resources/templates/list', 'resources/subscribe', 'resources/unsubscribe', 'completion/complete', 'logging/setLevel',
  'sampling/createMessage', 'elicitation/create', 'roots/list', 'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel',
  'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/message',
  'notifications/roots/list_changed', 'notifications/resources/updated', 'notifications/resources/list_changed',
  'notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/elicitation/complete',
]);

export function methodLabel(method: string | undefined): string {
  if (method === undefined) return 'response';
  return KNOWN_METHODS.has(method) ? method : 'other';
}

/** How the gateway answered an MCP POST; `answered_by_gateway`: for a backend whose account the user has not linked (SPEC §8). */
export type McpOutcome = 'relayed' | 'backend_error' | 'rejected' | 'state_unavailable' | 'answered_by_gateway';

export interface GaugeSources {
  openStreams(): number;
  activeSessions(): Promise<number>;
  /** Registers for the end of every store operation that waited for Redis (state/create-state.ts onStoreWait). */
  storeWaits?(listener: StoreWaitListener): void;
}

export class Metrics {
  readonly registry = new Registry();
  /** Updated on every request: the hot-path counter and histogram (hot-metrics.ts), same exposition. */
  readonly httpRequests = new HotCounter({ name: 'switchboard_http_requests_total', help: 'HTTP requests by route template, method and status', labelNames: ['method', 'route', 'status'], registry: this.registry });
  readonly httpDuration = new HotHistogram({
    name: 'switchboard_http_request_duration_seconds',
    help: 'Time to the end of the HTTP response (SSE streams excluded)',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registry: this.registry,
  });
  readonly mcpMessages = new HotCounter({ name: 'switchboard_mcp_messages_total', help: 'Client-to-backend MCP messages by backend, method and outcome', labelNames: ['backend', 'method', 'outcome'], registry: this.registry });
  readonly mcpDuration = new HotHistogram({
    name: 'switchboard_mcp_request_duration_seconds',
    help: 'Time from a client POST to its complete answer (JSON body or end of its SSE stream)',
    labelNames: ['backend', 'method'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registry: this.registry,
  });
  readonly sessionsStarted = new Counter({ name: 'switchboard_sessions_started_total', help: 'MCP sessions initialized', labelNames: ['backend'], registers: [this.registry] });
  readonly sessionsEnded = new Counter({ name: 'switchboard_sessions_ended_total', help: 'MCP sessions ended by DELETE or because the backend forgot them', labelNames: ['backend', 'reason'], registers: [this.registry] });
  readonly backendErrors = new Counter({ name: 'switchboard_backend_errors_total', help: 'Backend failures by backend and kind', labelNames: ['backend', 'reason'], registers: [this.registry] });
  readonly stateErrors = new Counter({ name: 'switchboard_state_errors_total', help: 'State store (Redis) operations that failed', labelNames: ['operation'], registers: [this.registry] });
  /**
   * Store operations that met Redis reconnecting or failing over (issue 45 §1; src/state/store-waits.ts), by outcome:
   * served (answered after waiting), gave_up (`redis.unavailableWait` passed, or a write that may have landed was not sent again → 503), refused (too many waiting on this replica → 503 at once).
   */
  readonly storeWaits = new Counter({ name: 'switchboard_store_waits_total', help: 'State store operations that waited for Redis to come back, by outcome (served, gave_up, refused)', labelNames: ['outcome'], registers: [this.registry] });
  /** How long those operations waited (served and gave_up; refused ones did not wait). */
  readonly storeWaitSeconds = new Histogram({
    name: 'switchboard_store_wait_seconds',
    help: 'How long state store operations waited for Redis to come back (served or gave up)',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60],
    registers: [this.registry],
  });
  /** outcome: sent (2xx) | status (another answer) | url | address | dns | redirect | timeout | too_large | network (safe-fetch.ts refusals and failures). */
  readonly approvalNotifications = new Counter({ name: 'switchboard_approval_notifications_total', help: 'approvals.notify webhook POSTs of new held-call requests, by outcome', labelNames: ['outcome'], registers: [this.registry] });
  readonly authFailures = new Counter({ name: 'switchboard_auth_failures_total', help: 'Requests refused by token checks', labelNames: ['reason'], registers: [this.registry] });
  readonly elicitations = new Counter({ name: 'switchboard_elicitations_total', help: 'URL-mode elicitations by provider and event (started, completed, declined, expired)', labelNames: ['provider', 'event'], registers: [this.registry] });
  readonly tokenRefreshes = new Counter({ name: 'switchboard_token_refreshes_total', help: 'Third-party token refreshes by provider and outcome', labelNames: ['provider', 'outcome'], registers: [this.registry] });
  /** outcome: ok | invalid_grant | refused | unavailable | timeout. Exchanges this replica made (cache hits are not exchanges). */
  readonly tokenExchanges = new Counter({ name: 'switchboard_token_exchanges_total', help: 'Token exchanges (RFC 8693, Entra on-behalf-of) for backends with tokenExchange, by backend and outcome', labelNames: ['backend', 'outcome'], registers: [this.registry] });
  /** route is the route template (e.g. /mcp/:backend); never the user. */
  readonly rateLimited = new Counter({ name: 'switchboard_rate_limited_total', help: 'MCP requests refused with 429 by the per-user rate limit, by route template', labelNames: ['route'], registers: [this.registry] });
  /** reason: error | timeout. Each one is a failed or slow background sync of the limiter's counts with Redis (at most one per flush interval); meanwhile the limit counts per replica only. */
  readonly rateLimitErrors = new Counter({ name: 'switchboard_rate_limit_errors_total', help: 'Rate-limit counter syncs with Redis that failed or were slow (the limit then counts per replica only)', labelNames: ['reason'], registers: [this.registry] });
  /** reason: scope | tenant | claim (backend access policy) or tool (a hidden tool was called). */
  readonly policyDenials = new Counter({ name: 'switchboard_policy_denials_total', help: 'Requests refused by a backend access policy or tool policy, by backend and reason', labelNames: ['backend', 'reason'], registers: [this.registry] });
  /** Tool definitions seen changed from their pin (issue 31 §2), once per new fingerprint, by backend and pinning mode. */
  readonly toolDefinitionChanges = new Counter({ name: 'switchboard_tool_definition_changes_total', help: 'Tool definitions a backend changed from their pin, by backend and pinning mode (log, hold, block)', labelNames: ['backend', 'mode'], registers: [this.registry] });
  /** With `pinning.scope: user`: a user's first sight of a tool whose definition differs from the first user's, once per definition across replicas (docs/pinning.md, issue 41 §2). */
  readonly toolDefinitionUserVariants = new Counter({ name: 'switchboard_tool_definition_user_variants_total', help: 'Tool definitions that differ between users of a backend (each user keeps their own pins), once per distinct definition, by backend', labelNames: ['backend'], registers: [this.registry] });

  /** Every config reload attempt (SIGHUP or a change of the file): applied, unchanged, invalid, needs_restart, or failed (an unexpected error while applying) (docs/operations-reload.md). */
  readonly configReloads = new Counter({ name: 'switchboard_config_reloads_total', help: 'Config file reloads by outcome (applied, unchanged, invalid, needs_restart, failed)', labelNames: ['outcome'], registers: [this.registry] });
  /** Applied reloads that loosened `policy`, backend `access` or `pinning` (issue 41 §6; reload/loosening.ts), once per kind per reload; each is also a `warn` naming what loosened. */
  readonly configReloadsLoosened = new Counter({ name: 'switchboard_config_reloads_loosened_total', help: 'Applied config reloads that loosened policy, access or pinning, by kind', labelNames: ['kind'], registers: [this.registry] });
  /**
   * Spans the OTLP export dropped (issue 44 part 1; src/telemetry/span-queue.ts), by reason: queue_full (the bounded queue was
   * full, the collector slower than the calls or away), export_failed (a batch the collector refused, could not be reached for, or did not answer in time).
   */
  readonly telemetrySpansDropped = new Counter({ name: 'switchboard_telemetry_spans_dropped_total', help: 'Spans the OTLP export dropped instead of holding up calls, by reason (queue_full, export_failed)', labelNames: ['reason'], registers: [this.registry] });
  /** Audit records a sink could not take (ops/audit-drops.ts): a failed write or export, a full export queue, or a record after its sink closed. */
  readonly auditRecordsDropped = new Counter({ name: 'switchboard_audit_records_dropped_total', help: 'Audit records lost, by sink (file, otlp) and reason (write_failed, export_failed, queue_full, closed)', labelNames: ['sink', 'reason'], registers: [this.registry] });
  constructor(sources: GaugeSources) {
    collectDefaultMetrics({ register: this.registry });
    // Every outcome is exported from the start, at 0, so that rate() and alerts see its first event.
    for (const outcome of ['served', 'gave_up', 'refused']) this.storeWaits.inc({ outcome }, 0);
    for (const reason of ['queue_full', 'export_failed']) this.telemetrySpansDropped.inc({ reason }, 0);
    sources.storeWaits?.((outcome, seconds) => this.storeWaited(outcome, seconds));
    new Gauge({
      name: 'switchboard_sse_streams_open',
      help: 'SSE streams this replica is relaying now',
      registers: [this.registry],
      collect() {
        this.set(sources.openStreams());
      },
    });
    new Gauge({
      name: 'switchboard_sessions_active',
      help: 'MCP sessions alive in the state store (the same for every replica sharing it: aggregate with max)',
      registers: [this.registry],
      async collect() {
        this.set(await sources.activeSessions().catch(() => Number.NaN));
      },
    });
  }

  /** One store operation's wait ended (src/state/store-waits.ts). */
  storeWaited(outcome: StoreWaitOutcome, seconds: number): void {
    this.storeWaits.inc({ outcome });
    if (outcome !== 'refused') this.storeWaitSeconds.observe(seconds);
  }

  /** Starts timing one client POST; call the result with the outcome when its answer is complete. */
  startMcpRequest(backend: string, method: string | undefined): (outcome: McpOutcome) => void {
    const label = methodLabel(method);
    const duration = this.mcpDuration.at(backend, label);
    // One clock reading at each end (issue 29: no timer object, no merged labels).
    const started = performance.now();
    return (outcome) => {
      this.mcpDuration.observe(duration, (performance.now() - started) / 1000);
      this.mcpMessages.at(backend, label, outcome).value++;
    };
  }
}
