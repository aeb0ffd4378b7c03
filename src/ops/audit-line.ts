/**
 * An audit record's JSON line written field by field into a batch (issue 44 part 1): the same
 * text as `JSON.stringify` of the record object audit.ts makes for an OTLP sink — same keys, same
 * order, absent fields left out (test/policy/cel-rules.test.ts compares them) — without that
 * object, a joined string or the copies in between.
 *
 * What repeats from one record to the next is copied as bytes: the time up to its second, the
 * event, and the members by runs that repeat together (kept-runs.ts) — the user's digest, claims,
 * tenant, session, endpoint, backend and method; the tool, prompt or URI; the decision, rule,
 * approval and outcome — each member also kept by value (kept-encodings.ts). A call's own values
 * (its request id, trace id, duration, milliseconds, argument hash) are written as they come,
 * numbers as digits.
 */
import type { AuditRequest, AuditVerdict } from './audit.js';
import { KeptEncodings } from './kept-encodings.js';
import { KeptRun } from './kept-runs.js';
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

/**
 * The members kept by run (kept-runs.ts), by slot in the line's order: who and where (user to
 * method), what (tool, prompt, URI), the verdict (decision to outcome). A run is copied as one
 * piece when all its values are those of a line before; each member's text is also kept by value
 * (kept-encodings.ts) for the lines that differ. The call's own values (request id, argument hash,
 * duration, trace id) sit between the runs, written as they come.
 */
const MEMBERS = ['user', 'claims', 'tenant', 'session', 'endpoint', 'backend', 'method', 'tool', 'prompt', 'uri', 'decision', 'rule', 'approval', 'outcome'] as const;
const CLAIMS_SLOT = MEMBERS.indexOf('claims');
const WHAT_SLOT = MEMBERS.indexOf('tool');
const VERDICT_SLOT = MEMBERS.indexOf('decision');

const bytesOf = (text: string) => Buffer.from(text, 'utf8');
const OPEN = {
  claims: bytesOf('"claims":'),
  requestId: bytesOf(',"requestId":'),
  arguments: bytesOf(',"arguments":'),
  sha256: bytesOf(',"argumentsSha256":"'),
  truncated: bytesOf(',"argumentsTruncated":true'),
  code: bytesOf(',"code":'),
  durationMs: bytesOf(',"durationMs":'),
  traceId: bytesOf(',"traceId":'),
};
const QUOTE = bytesOf('"');
/** A member's string value, as `JSON.stringify` writes it. */
const jsonStringValue = (value: string, w: Utf8BatchWriter) => w.jsonString(value);
const LINE_END = bytesOf('}\n');

export class AuditLineWriter {
  readonly #event = new KeptEncodings('Z","event":', jsonStringValue);
  /** Each member's `"name":` and its values' text as they repeat, by slot (claims: written as given, already JSON). */
  readonly #members = MEMBERS.map((name) => new KeptEncodings(`"${name}":`, jsonStringValue));
  readonly #writeMember = (slot: number, value: unknown, w: Utf8BatchWriter) => {
    if (slot !== CLAIMS_SLOT) return this.#members[slot]!.write(value as string, w);
    w.bytes(OPEN.claims);
    w.write(value as string);
  };
  readonly #who = new KeptRun(0, WHAT_SLOT, this.#writeMember);
  readonly #what = new KeptRun(WHAT_SLOT, VERDICT_SLOT, this.#writeMember);
  readonly #verdict = new KeptRun(VERDICT_SLOT, MEMBERS.length, this.#writeMember);
  /** The members of the line being written, by slot (a run copies the values it keeps). */
  readonly #values: Array<string | undefined> = MEMBERS.map(() => undefined);
  /** `{"schema":…,"time":"` and the time up to its second (`2026-11-30T08:11:26.`), remade once a second. */
  #second = Number.NaN;
  #secondOpening: Buffer = Buffer.alloc(0);

  constructor(private readonly schema: string) {}

  /** Appends the line of a record made at `ms` (epoch milliseconds) to `w`. */
  write(w: Utf8BatchWriter, ms: number, r: AuditRequest, v: AuditVerdict, x: LineExtras): void {
    // In MEMBERS' order.
    const values = this.#values;
    values[0] = x.user;
    values[1] = x.claims;
    values[2] = x.tenant;
    values[3] = r.session;
    values[4] = r.endpoint;
    values[5] = r.backend;
    values[6] = r.method;
    values[7] = r.tool;
    values[8] = r.prompt;
    values[9] = r.uri;
    values[10] = v.decision;
    values[11] = v.rule;
    values[12] = v.approval;
    values[13] = v.outcome;
    this.#time(w, ms);
    this.#event.write(v.event, w);
    this.#who.write(values, false, w);
    if (r.requestId !== undefined) {
      w.bytes(OPEN.requestId);
      writeJson(w, r.requestId);
    }
    this.#what.write(values, false, w);
    if (x.args) {
      w.bytes(OPEN.sha256);
      w.write(x.args.sha256);
      w.bytes(QUOTE);
      if (x.args.copy) {
        w.bytes(OPEN.arguments);
        writeJson(w, r.arguments);
      } else if (x.args.truncated) w.bytes(OPEN.truncated);
    }
    this.#verdict.write(values, false, w);
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
