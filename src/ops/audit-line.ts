/**
 * An audit record's JSON line written field by field into a batch (issue 44 part 1): the same
 * text as `JSON.stringify` of the record object audit.ts makes for an OTLP sink — same keys, same
 * order, absent fields left out (test/policy/cel-rules.test.ts compares them) — without that
 * object, a joined string or the copies in between.
 *
 * What repeats from one record to the next is copied as bytes (kept-encodings.ts): the time up
 * to its second, and each member whose value repeats — the event, the user's digest, session,
 * endpoint, backend, method, tool, decision, rule, outcome. A call's own values (its request id,
 * trace id, duration, milliseconds, argument hash) are written as they come, numbers as digits.
 */
import type { AuditRequest, AuditVerdict } from './audit.js';
import { KeptEncodings } from './kept-encodings.js';
import { isoTime } from './logger.js';
import type { Utf8BatchWriter } from './utf8-batch-writer.js';

/** What audit.ts works out for a record besides its two parts. */
export interface LineExtras {
  /** `user`: the first characters of the user key. */
  user: string;
  /** The listed claims, as JSON. */
  claims: string;
  tenant: string | undefined;
  /** The arguments' hash, and whether they are copied or marked truncated (tools/call and prompts/get). */
  args?: { sha256: string; copy: boolean; truncated: boolean };
}

/** The members whose string values are kept as they repeat: all but the call's own (ids, times, hashes). */
const KEPT_MEMBERS = ['user', 'tenant', 'session', 'endpoint', 'backend', 'method', 'tool', 'prompt', 'uri', 'decision', 'rule', 'approval', 'outcome'] as const;

/** A member `,"name":` whose string values are kept as they repeat. */
const member = (name: string) => new KeptEncodings(`,"${name}":`, (value) => JSON.stringify(value));

const bytesOf = (text: string) => Buffer.from(text, 'utf8');
const OPEN = {
  claims: bytesOf(',"claims":'),
  requestId: bytesOf(',"requestId":'),
  arguments: bytesOf(',"arguments":'),
  sha256: bytesOf(',"argumentsSha256":"'),
  truncated: bytesOf(',"argumentsTruncated":true'),
  code: bytesOf(',"code":'),
  durationMs: bytesOf(',"durationMs":'),
  traceId: bytesOf(',"traceId":'),
};
const QUOTE = bytesOf('"');
const LINE_END = bytesOf('}\n');

export class AuditLineWriter {
  readonly #event = new KeptEncodings('Z","event":', (value) => JSON.stringify(value));
  /** One per member; each keeps its own values (so a backend's name and a tool's are not mixed). */
  readonly #kept = Object.fromEntries(KEPT_MEMBERS.map((name) => [name, member(name)])) as Record<(typeof KEPT_MEMBERS)[number], KeptEncodings>;
  /** `{"schema":…,"time":"` and the time up to its second (`2026-11-30T08:11:26.`), remade once a second. */
  #second = Number.NaN;
  #secondOpening: Buffer = Buffer.alloc(0);

  constructor(private readonly schema: string) {}

  /** Appends the line of a record made at `ms` (epoch milliseconds) to `w`. */
  write(w: Utf8BatchWriter, ms: number, r: AuditRequest, v: AuditVerdict, x: LineExtras): void {
    const kept = this.#kept;
    this.#time(w, ms);
    this.#event.write(v.event, w);
    kept.user.write(x.user, w);
    w.bytes(OPEN.claims);
    w.write(x.claims);
    if (x.tenant !== undefined) kept.tenant.write(x.tenant, w);
    if (r.session !== undefined) kept.session.write(r.session, w);
    if (r.endpoint !== undefined) kept.endpoint.write(r.endpoint, w);
    if (r.backend !== undefined) kept.backend.write(r.backend, w);
    if (r.method !== undefined) kept.method.write(r.method, w);
    if (r.requestId !== undefined) {
      w.bytes(OPEN.requestId);
      writeJson(w, r.requestId);
    }
    if (r.tool !== undefined) kept.tool.write(r.tool, w);
    if (r.prompt !== undefined) kept.prompt.write(r.prompt, w);
    if (r.uri !== undefined) kept.uri.write(r.uri, w);
    if (x.args) {
      w.bytes(OPEN.sha256);
      w.write(x.args.sha256);
      w.bytes(QUOTE);
      if (x.args.copy) {
        w.bytes(OPEN.arguments);
        writeJson(w, r.arguments);
      } else if (x.args.truncated) w.bytes(OPEN.truncated);
    }
    kept.decision.write(v.decision, w);
    kept.rule.write(v.rule, w);
    if (v.approval !== undefined) kept.approval.write(v.approval, w);
    kept.outcome.write(v.outcome, w);
    if (v.code !== undefined) {
      w.bytes(OPEN.code);
      writeJson(w, v.code);
    }
    w.bytes(OPEN.durationMs);
    writeMillis(w, v.durationMs);
    if (r.traceId !== undefined) {
      w.bytes(OPEN.traceId);
      w.jsonString(r.traceId);
    }
    w.bytes(LINE_END);
  }

  /** `{"schema":"…","time":"` and `new Date(ms).toISOString()` but its closing `Z` (which the event's opening carries). */
  #time(w: Utf8BatchWriter, ms: number): void {
    const second = Math.floor(ms / 1000);
    if (second !== this.#second) {
      this.#second = second;
      // "2026-11-30T08:11:26." of "2026-11-30T08:11:26.000Z".
      this.#secondOpening = bytesOf(`{"schema":${JSON.stringify(this.schema)},"time":"${isoTime(second * 1000).slice(0, -4)}`);
    }
    w.bytes(this.#secondOpening);
    w.integer(ms - second * 1000, 3);
  }
}

/** A value as `JSON.stringify` writes it as a member (a string, a number, null, an object). */
function writeJson(w: Utf8BatchWriter, value: unknown): void {
  if (typeof value === 'string') w.jsonString(value);
  else if (Number.isSafeInteger(value) && (value as number) >= 0) w.integer(value as number);
  else w.write(JSON.stringify(value));
}

/**
 * A duration in milliseconds rounded to the microsecond, as `JSON.stringify(Math.round(ms * 1000) / 1000)`
 * writes it: its whole milliseconds, then up to three decimals without trailing zeros. Below
 * 10^9 ms (11 days) that is the shortest text that reads back as the same number, which is
 * JSON's; anything else goes to `JSON.stringify`.
 */
function writeMillis(w: Utf8BatchWriter, ms: number): void {
  const micros = Math.round(ms * 1000);
  if (!(micros >= 0 && micros < 1e12)) return w.write(JSON.stringify(micros / 1000));
  const whole = Math.floor(micros / 1000);
  let fraction = micros - whole * 1000;
  w.integer(whole);
  if (fraction === 0) return;
  let digits = 3;
  while (fraction % 10 === 0) {
    fraction /= 10;
    digits--;
  }
  w.byte(0x2e /* . */);
  w.integer(fraction, digits);
}
