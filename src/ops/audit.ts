/**
 * The audit trail (issue 30 §2; schema and sinks in docs/policy-and-audit.md): one JSON line
 * per request that reaches or is refused for a backend, written to its own sink apart from
 * the access log. The record schema is versioned (`schema: "switchboard.audit/v1"`) and only
 * ever extended within a version; SIEMs parse it.
 *
 * What a record never holds: a token, a cookie, a `requestState`, a third-party credential or
 * the raw `sub` — callers hand in only the fields below, the user as the digest the access log
 * uses, and the claims the operator listed in `audit.claims`.
 *
 * Off (`audit.sink: none`) there is no Audit at all (createAudit returns undefined) and every
 * caller tests for it first: no hashing, no record, no allocation on the request path.
 */
import { hash } from 'node:crypto';
import type { Config } from '../config/schema.js';
import { openAuditFile } from './audit-file.js';
import type { AuditDrops, AuditSinkName } from './audit-drops.js';
import { AuditLineWriter, type LineExtras } from './audit-line.js';
import { canonicalJson } from './canonical-json.js';
import { canonicalJsonInto } from './canonical-json-bytes.js';
import { isoTime } from './logger.js';
import { Utf8BatchWriter } from './utf8-batch-writer.js';

export const AUDIT_SCHEMA = 'switchboard.audit/v1';
/** Characters of the user key (iss+sub digest) a record shows: those of the access log's `user`. */
export const AUDIT_USER_CHARS = 16;

export type AuditDecision = 'allow' | 'deny';
/** `timeout`, `cancelled`, `disconnected`: the answer never came (policy/unanswered.ts). */
export type AuditOutcome = 'ok' | 'isError' | 'error' | 'timeout' | 'cancelled' | 'disconnected';

/** Who asked, where and what: a request's part of a record (policy/audit-calls.ts builds it once per request). */
export interface AuditRequest {
  userKey: string;
  claims: Readonly<Record<string, unknown>>;
  session?: string;
  /** The request path (`/mcp/crm`, `/mcp`); absent for a link requirement, which is not tied to one. */
  endpoint?: string;
  backend?: string;
  method?: string;
  requestId?: string | number | null;
  tool?: string;
  prompt?: string;
  uri?: string;
  /** Present for tools/call and prompts/get: hashed (and copied when opted in) here. */
  arguments?: unknown;
  traceId?: string;
}

/** What was decided and how it ended: a record's other part. */
export interface AuditVerdict {
  event: 'call' | 'refusal';
  decision: AuditDecision;
  /** The rule that decided: a `policy.rules` name, a list entry such as `access.tools.deny[0]`, or `policy.default`. */
  rule: string;
  /** The approval a call of a `confirm` rule used (issue 46 §5; its `approval-…` records have the same id). */
  approval?: string;
  outcome: AuditOutcome;
  code?: number;
  durationMs: number;
}

/** What the call sites know; the Audit adds schema, time, user digest, claims and the argument hash. */
export type AuditEvent = AuditRequest & AuditVerdict;

/** A step of a held call's approval, as {@link Audit.approval} records it. */
export interface ApprovalAuditEvent {
  step: 'requested' | 'approved' | 'denied' | 'expired' | 'used';
  /** The caller's key (the record shows its digest, as `user`). */
  userKey: string;
  /** Who decided (approved, denied): their key, shown as its digest. */
  approverKey?: string;
  approval: string;
  rule: string;
  backend: string;
  tool: string;
  argumentsHash: string;
  fourEyes: boolean;
  expiresAt: number;
}

/** What an HTTP-level refusal knows of its request (a Fastify request has these). */
export interface AuditedHttpRequest {
  url: string;
  headers: Record<string, string | string[] | undefined>;
  principal?: { userKey: string; claims: Readonly<Record<string, unknown>> };
  params?: unknown;
}

export interface AuditSink {
  write(line: string): unknown;
  /**
   * A sink that keeps its records as bytes (`audit.sink: file`, audit-file.ts): the batch the
   * next record's line is written into, so the line is never a string; undefined once the sink
   * is closed (the record is dropped, and the sink tells of it). {@link added} follows each record.
   */
  batch?(): Utf8BatchWriter | undefined;
  /** A record was written into {@link batch}. */
  added?(): void;
  /** A sink that takes the record itself (`audit.sink: otlp`, src/telemetry/audit-logs.ts) gets it here instead of a line. */
  writeRecord?(record: Record<string, unknown>): unknown;
  /** Writes what is held and lets go of the sink; `done` once that is over. */
  end?(done?: () => void): unknown;
}

/** The first size of {@link Audit}'s canonical-arguments buffer: a call's arguments are mostly a few hundred bytes. */
const CANONICAL_BYTES = 4096;
/** The largest that buffer is kept at once grown. */
const CANONICAL_KEPT_BYTES = 64 * 1024;

/** A duration in ms to the µs. */
const roundMs = (ms: number) => Math.round(ms * 1000) / 1000;

export class Audit {
  readonly #claims: readonly string[];
  readonly #include: boolean;
  readonly #maxBytes: number;
  readonly #line = new AuditLineWriter(AUDIT_SCHEMA);
  /** Where a record's arguments are written as canonical JSON to be hashed (canonical-json-bytes.ts); reused, grown as needed. */
  #canonical = new Utf8BatchWriter(Buffer.allocUnsafeSlow(CANONICAL_BYTES));

  /**
   * @param tenantOf the user's tenant from the claims (`auth.tenantClaim`, read as the access
   *   policies read it: src/policy/backend-access.ts claimValues), given by the wiring.
   */
  constructor(
    private readonly sink: AuditSink,
    settings: Config['audit'],
    private readonly tenantOf: (claims: Readonly<Record<string, unknown>>) => string | undefined = () => undefined,
  ) {
    this.#claims = settings.claims;
    this.#include = settings.arguments.include;
    this.#maxBytes = settings.arguments.maxBytes;
  }

  record(e: AuditEvent): void {
    this.recordOf(e, e);
  }

  /**
   * A record from its two parts, kept apart so that a call's record is written from the
   * request's part made when it was judged and a small verdict, without copying the one into
   * the other (issue 44 part 1: an object spread of the request's 13 fields per record).
   */
  recordOf(r: AuditRequest, v: AuditVerdict): void {
    const sink = this.sink;
    if (sink.writeRecord) sink.writeRecord(this.#object(r, v));
    else if (sink.batch) {
      const w = sink.batch();
      if (!w) return;
      const at = w.length;
      try {
        this.#lineInto(r, v, w);
      } catch (err) {
        w.truncate(at);
        throw err;
      }
      sink.added!();
    } else {
      const w = new Utf8BatchWriter();
      this.#lineInto(r, v, w);
      sink.write(w.view().toString('utf8'));
    }
  }

  /** The record as an object, for a sink that takes it whole (`audit.sink: otlp`). */
  #object(r: AuditRequest, v: AuditVerdict): Record<string, unknown> {
    const record: Record<string, unknown> = {
      schema: AUDIT_SCHEMA,
      time: isoTime(Date.now()),
      event: v.event,
      user: r.userKey.slice(0, AUDIT_USER_CHARS),
      claims: this.#pickClaims(r.claims),
      tenant: this.tenantOf(r.claims),
      session: r.session,
      endpoint: r.endpoint,
      backend: r.backend,
      method: r.method,
      requestId: r.requestId,
      tool: r.tool,
      prompt: r.prompt,
      uri: r.uri,
    };
    if (r.arguments !== undefined) {
      const args = this.#arguments(r.arguments);
      record.argumentsSha256 = args.sha256;
      if (args.copy) record.arguments = r.arguments;
      else if (args.truncated) record.argumentsTruncated = true;
    }
    Object.assign(record, { decision: v.decision, rule: v.rule, approval: v.approval, outcome: v.outcome, code: v.code, durationMs: roundMs(v.durationMs), traceId: r.traceId });
    return record;
  }

  /** The record's JSON line into `w` (audit-line.ts): the same text as `JSON.stringify` of {@link #object}. */
  #lineInto(r: AuditRequest, v: AuditVerdict, w: Utf8BatchWriter): void {
    const extras: LineExtras = {
      user: r.userKey.slice(0, AUDIT_USER_CHARS),
      claims: this.#claims.length ? JSON.stringify(this.#pickClaims(r.claims)) : '{}',
      tenant: this.tenantOf(r.claims),
    };
    if (r.arguments !== undefined) extras.args = this.#arguments(r.arguments);
    this.#line.write(w, Date.now(), r, v, extras);
  }

  #pickClaims(all: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const claims: Record<string, unknown> = {};
    for (const name of this.#claims) if (Object.hasOwn(all, name)) claims[name] = all[name];
    return claims;
  }

  /**
   * The arguments' hash (RFC 8785 canonical JSON, SHA-256), and whether they are copied or
   * marked truncated. One-shot hash (Node ≥ 20.12): no Hash object per record; of the canonical
   * bytes when they can be written directly, else of canonical-json.ts's text (the same bytes).
   */
  #arguments(args: unknown): { sha256: string; copy: boolean; truncated: boolean } {
    const w = this.#canonical;
    w.truncate(0);
    let sha256: string;
    let bytes: number;
    if (canonicalJsonInto(w, args)) {
      sha256 = hash('sha256', w.view(), 'hex');
      bytes = w.length;
      // One call's large arguments do not keep a large buffer for good.
      if (w.buffer.length > CANONICAL_KEPT_BYTES) this.#canonical = new Utf8BatchWriter(Buffer.allocUnsafeSlow(CANONICAL_BYTES));
    } else {
      const canonical = canonicalJson(args);
      sha256 = hash('sha256', canonical, 'hex');
      bytes = Buffer.byteLength(canonical);
    }
    if (!this.#include) return { sha256, copy: false, truncated: false };
    const copy = bytes <= this.#maxBytes;
    return { sha256, copy, truncated: !copy };
  }

  /**
   * A request refused before its body was read (rate limit, backend access): no method, tool
   * or arguments are known yet. Requests without a principal are not audited (they were
   * answered 401, and have no user).
   */
  refusal(request: AuditedHttpRequest, rule: string, code: number): void {
    const principal = request.principal;
    if (!principal) return;
    const backend = (request.params as { backend?: unknown } | undefined)?.backend;
    const session = request.headers['mcp-session-id'];
    this.record({
      event: 'refusal',
      userKey: principal.userKey,
      claims: principal.claims,
      session: typeof session === 'string' ? session : undefined,
      endpoint: request.url.split('?')[0]!,
      backend: typeof backend === 'string' ? backend : undefined,
      decision: 'deny',
      rule,
      outcome: 'error',
      code,
      durationMs: 0,
      traceId: traceIdOf(undefined, request.headers.traceparent),
    });
  }

  /**
   * A request answered with a link to connect an account (`upstreamAuth`, SPEC §4), or to
   * connect it again with more scopes (`stepUp`). The code is that of the URL-mode answer
   * (-32042); form-only clients get the same link as a tool result or a -32014 error.
   */
  linkRequired(principal: { userKey: string; claims: Readonly<Record<string, unknown>> }, backend: string, session: string | undefined, stepUp: boolean): void {
    const rule = stepUp ? 'upstreamAuth.stepUp' : 'upstreamAuth.link';
    this.record({ event: 'refusal', userKey: principal.userKey, claims: principal.claims, session, backend, decision: 'deny', rule, outcome: 'error', code: -32042, durationMs: 0 });
  }

  /**
   * A backend's tool definition changed from its pin (issue 31 §2, docs/pinning.md): event
   * `tool-definition-changed`, written once per new fingerprint by whichever replica saw it
   * first. No user: the pin is the backend's, whoever's list showed the change. `decision`
   * is what the mode does with it (`allow` for log, `hold`, `deny` for block).
   */
  toolDefinitionChanged(e: { backend: string; tool: string; mode: string; pinned?: string; seen: string }): void {
    const decision = e.mode === 'block' ? 'deny' : e.mode === 'hold' ? 'hold' : 'allow';
    const record = { schema: AUDIT_SCHEMA, time: new Date().toISOString(), event: 'tool-definition-changed', backend: e.backend, tool: e.tool, decision, rule: `backends.${e.backend}.pinning.mode`, mode: e.mode, pinnedSha256: e.pinned, seenSha256: e.seen };
    this.sink.write(JSON.stringify(record) + '\n');
  }

  /**
   * A step of a held call's approval (issue 46 §5, policy/approval-events.ts): event
   * `approval-requested`, `approval-approved`, `approval-denied`, `approval-expired` or
   * `approval-used`, with the caller's digest, the approver's digest (who decided), the rule,
   * backend, tool and the arguments' hash — never the arguments, whatever
   * `audit.arguments.include` says: the approval page is where they are shown.
   */
  approval(e: ApprovalAuditEvent): void {
    const record: Record<string, unknown> = {
      schema: AUDIT_SCHEMA,
      time: isoTime(Date.now()),
      event: `approval-${e.step}`,
      user: e.userKey.slice(0, AUDIT_USER_CHARS),
      backend: e.backend,
      tool: e.tool,
      argumentsSha256: e.argumentsHash,
      rule: e.rule,
      approval: e.approval,
      fourEyes: e.fourEyes,
      approver: e.approverKey?.slice(0, AUDIT_USER_CHARS),
      expiresAt: new Date(e.expiresAt).toISOString(),
    };
    if (this.sink.writeRecord) this.sink.writeRecord(record);
    else this.sink.write(JSON.stringify(record) + '\n');
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.sink.end || (this.sink as unknown) === process.stdout) return resolve();
      this.sink.end(() => resolve());
    });
  }
}

/**
 * The Audit for `audit.sink`, or undefined when it is off. `stdout` shares the process's
 * standard output with the access log; every audit line starts with `{"schema":"switchboard.audit/v1"`,
 * which no log line has, so a collector routes on that field. `file` appends (O_APPEND) to
 * `audit.path` in batches (audit-file.ts); rotation is left to the platform (logrotate
 * `copytruncate`, or a sidecar), since appends continue at the file's new end after a truncation.
 */
/**
 * Where records go besides `stdout` and `file`, made by others: tests' `override` (whatever
 * `audit.sink` says), and `audit.sink: otlp`'s (src/telemetry/audit-logs.ts); and who is told of
 * the records a sink loses (audit-drops.ts), by sink.
 */
export interface AuditSinks {
  override?: AuditSink;
  otlp?: AuditSink;
  dropped?: (sink: AuditSinkName) => AuditDrops;
}

export function createAudit(config: Config, sinks: AuditSinks, tenantOf: (claims: Readonly<Record<string, unknown>>) => string | undefined): Audit | undefined {
  const settings = config.audit;
  if (settings.sink === 'none' && !sinks.override) return undefined;
  if (settings.sink === 'otlp' && !sinks.override && !sinks.otlp) throw new Error('audit.sink otlp needs the sink of the telemetry (src/telemetry/audit-logs.ts)');
  const sink = sinks.override ?? (settings.sink === 'otlp' ? sinks.otlp! : settings.sink === 'file' ? openAuditFile(settings.path!, settings.flushInterval, sinks.dropped?.('file')) : process.stdout);
  return new Audit(sink, settings, tenantOf);
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}/;

/**
 * The trace id of the client's W3C trace context: `params._meta.traceparent` (the MCP
 * convention's carrier) first, else the `traceparent` HTTP header; undefined when neither is
 * valid. With `telemetry` on, the SERVER span's trace id is used instead (policy/audit-calls.ts).
 */
export function traceIdOf(meta: unknown, header: string | string[] | undefined): string | undefined {
  const fromMeta = meta && typeof meta === 'object' ? (meta as { traceparent?: unknown }).traceparent : undefined;
  const value = typeof fromMeta === 'string' ? fromMeta : typeof header === 'string' ? header : undefined;
  const id = value ? TRACEPARENT.exec(value)?.[1] : undefined;
  return id && id !== '0'.repeat(32) ? id : undefined;
}
