/**
 * The OTLP/JSON encoding of the values every span is made of, written as text (issue 44 part 1:
 * the SDK's encoder was 13.6 µs of a span's 18 µs of CPU, most of it intermediate objects and
 * `JSON.stringify` over them). Each function appends to one string; nothing is built to be
 * stringified afterwards.
 *
 * The encoding is the OTLP specification's "JSON Protobuf Encoding"
 * (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding, proto3 JSON mapping with
 * OTLP's deviations: trace and span ids as hex strings, not base64; enums as integers; field
 * names in lowerCamelCase), of the messages in opentelemetry/proto/common/v1/common.proto
 * (`AnyValue`, `KeyValue`). Where the specification leaves a choice, the choice is the one the
 * SDK's `JsonTraceSerializer` (@opentelemetry/otlp-transformer) makes, so a collector receives the
 * same document from either (test/telemetry/otlp-json-encoding.test.ts compares them):
 * - 64-bit times (`fixed64` nanoseconds) as decimal strings, as proto3 JSON requires;
 * - an integer attribute as a JSON number (`intValue`): proto3 JSON parsers accept a number or a
 *   string for int64, and a JavaScript number is exact below 2^53;
 * - a number that is not an integer as `doubleValue`; NaN and ±Infinity as `null`, as
 *   `JSON.stringify` writes them;
 * - bytes (`Uint8Array`) as base64 (`bytesValue`), a plain object as `kvlistValue`, and
 *   anything else (null or undefined inside an array) as the empty AnyValue `{}`.
 */
import type { HrTime } from '@opentelemetry/api';
import { KeptEncodings } from '../ops/kept-encodings.js';
import { NEEDS_ESCAPE, type Utf8BatchWriter } from '../ops/utf8-batch-writer.js';
import { KeptRun } from '../ops/kept-runs.js';
import { SLOT, SPAN_KEYS } from './span-attributes.js';

/** A JSON string literal, exactly as `JSON.stringify` writes it; without a copy when nothing needs escaping. */
export function jsonString(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** A JSON number as `JSON.stringify` writes it (non-finite: `null`). */
export function jsonNumber(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

const NANOS_PADDING = '000000000';

/**
 * An `HrTime` ([seconds, nanoseconds]) as nanoseconds since the epoch, a decimal string (proto3
 * JSON's `fixed64`). Digits are joined rather than computed: seconds × 10^9 passes 2^53 in 1970
 * + 104 days. Out-of-range parts (never made by the SDK) go through BigInt, as the SDK's own.
 */
export function nanosString(time: HrTime): string {
  const seconds = Math.trunc(time[0]);
  const nanos = Math.trunc(time[1]);
  if (joinable(seconds, nanos)) {
    const digits = String(nanos);
    return `"${seconds}${NANOS_PADDING.slice(digits.length)}${digits}"`;
  }
  return `"${BigInt(seconds) * 1_000_000_000n + BigInt(nanos)}"`;
}

/** Whether a time's digits can be joined: positive seconds of at most 15 digits, nanoseconds within a second. */
function joinable(seconds: number, nanos: number): boolean {
  return seconds > 0 && nanos >= 0 && nanos < 1e9 && seconds < 1e15;
}

/**
 * A time member of a span — its opening (`,"kind":2,"startTimeUnixNano":`, `,"endTimeUnixNano":`)
 * and its value, {@link nanosString}'s digits written into `w` with no string made for them. The
 * opening, the quote and the seconds' digits are kept as one piece of bytes while the second
 * lasts: every span of that second shares them (one copy, where the opening and the seconds
 * were two: issue 44 part 1).
 */
export class TimeMember {
  #seconds = Number.NaN;
  #head = Buffer.alloc(0);

  constructor(readonly opening: string) {}

  /** The member for the time in two parts, seconds and nanoseconds (an `HrTime`'s, or a gateway span's: recorded-span.ts epochSeconds). */
  write(secondsPart: number, nanosPart: number, w: Utf8BatchWriter): void {
    const seconds = Math.trunc(secondsPart);
    const nanos = Math.trunc(nanosPart);
    if (!joinable(seconds, nanos)) return w.write(this.opening + nanosString([secondsPart, nanosPart]));
    if (seconds !== this.#seconds) {
      this.#seconds = seconds;
      this.#head = Buffer.from(`${this.opening}"${seconds}`, 'utf8');
    }
    w.bytes(this.#head);
    w.integer(nanos, 9);
    w.byte(QUOTE);
  }
}

/** A time with no opening. */
const BARE_TIME = new TimeMember('');

/** {@link nanosString} written into `w` by a {@link TimeMember} with no opening (the encoding test checks the digits by it). */
export function writeNanos(time: HrTime, w: Utf8BatchWriter): void {
  BARE_TIME.write(time[0], time[1], w);
}

const QUOTE = 0x22;

/**
 * {@link jsonNumber} written into `w` (a count, a status code, a kind: an integer's digits
 * straight into the buffer; `integer` writes any other finite number as `String(n)`, which is
 * jsonNumber's text for it).
 */
export function writeNumber(n: number, w: Utf8BatchWriter): void {
  if (Number.isFinite(n)) w.integer(n);
  else w.write(jsonNumber(n));
}

/** A value as an OTLP `AnyValue` object. */
export function anyValue(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return `{"stringValue":${jsonString(value)}}`;
    case 'number':
      return Number.isInteger(value) ? `{"intValue":${jsonNumber(value)}}` : `{"doubleValue":${jsonNumber(value)}}`;
    case 'boolean':
      return value ? '{"boolValue":true}' : '{"boolValue":false}';
    case 'object':
      return objectValue(value);
    default:
      return '{}';
  }
}

/** Bytes, an array (`ArrayValue`) or a map (`KeyValueList`); null is the empty AnyValue. */
function objectValue(value: object | null): string {
  if (value === null) return '{}';
  if (value instanceof Uint8Array) return `{"bytesValue":"${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64')}"}`;
  if (Array.isArray(value)) {
    let out = '{"arrayValue":{"values":[';
    for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + anyValue(value[i]);
    return `${out}]}}`;
  }
  return `{"kvlistValue":{"values":${keyValues(value as Record<string, unknown>)}}}`;
}

/** Attributes as the JSON array of OTLP `KeyValue`s, in their keys' order. */
export function keyValues(attributes: Record<string, unknown>): string {
  let out = '[';
  let first = true;
  for (const key of Object.keys(attributes)) {
    out += `${first ? '' : ','}${keyValue(key, attributes[key])}`;
    first = false;
  }
  return `${out}]`;
}

/** The most attribute keys whose encodings are kept: a gateway's are a few dozen, fixed. */
const KEYS_KEPT = 1024;

/** `{"stringValue":`, and the `}}` that closes it and its `KeyValue`. */
const STRING_VALUE = Buffer.from('{"stringValue":');
const CLOSE_TWO = Buffer.from('}}');

/** A string value's `AnyValue` and the `}` that closes its `KeyValue`, written into `w`. */
function writeStringKeyValue(value: string, w: Utf8BatchWriter): void {
  w.bytes(STRING_VALUE);
  w.jsonString(value);
  w.bytes(CLOSE_TWO);
}

/**
 * Each attribute key's `{"key":…,"value":` (escaped once per key rather than once per span) and
 * the whole `KeyValue`s of its string values as they repeat (ops/kept-encodings.ts): a span's
 * attributes mostly repeat call after call (method, tool, backend, transport, …).
 */
const keyEncodings = new Map<string, KeptEncodings>();

/** Keys whose values never repeat: nothing of theirs is kept (or looked up). */
const UNIQUE_KEYS: ReadonlySet<string> = new Set(['jsonrpc.request.id']);

function encodingsOf(key: string): KeptEncodings {
  let encodings = keyEncodings.get(key);
  if (encodings === undefined) {
    encodings = new KeptEncodings(`{"key":${jsonString(key)},"value":`, writeStringKeyValue, UNIQUE_KEYS.has(key) ? 0 : undefined);
    if (keyEncodings.size < KEYS_KEPT) keyEncodings.set(key, encodings);
  }
  return encodings;
}

/** One `KeyValue`, as text (resources, scopes, events, links: not a span's attributes, which are written by {@link writeKeyValues}). */
function keyValue(key: string, value: unknown): string {
  return `${encodingsOf(key).opening}${anyValue(value)}}`;
}

/**
 * Attributes as the JSON array of OTLP `KeyValue`s, in their keys' order, written into `w`. A
 * string value's whole `KeyValue` is kept as bytes per key ({@link encodingsOf}): most are copied,
 * not escaped, joined and encoded again (issue 44 part 1). The keys are walked by `for…in` (own
 * enumerable keys of a plain object, in the order `Object.keys` gives): V8 then reads each value
 * from the object's enumeration cache, not by a lookup of a key among many shapes.
 */
export function writeKeyValues(attributes: Record<string, unknown>, w: Utf8BatchWriter): void {
  w.write('[');
  let first = true;
  for (const key in attributes) {
    if (!Object.hasOwn(attributes, key)) continue;
    if (!first) w.write(',');
    first = false;
    writeKeyValue(key, attributes[key], w);
  }
  w.write(']');
}

/** `{"intValue":` (closed as a string value is, by `}}`). */
const INT_VALUE = Buffer.from('{"intValue":');

/** Each span attribute's encodings, by its slot (span-attributes.ts): found without a lookup by name. */
const SLOT_ENCODINGS: readonly KeptEncodings[] = SPAN_KEYS.map((key) => encodingsOf(key));

/** Each slot's opening with `{"intValue":` after it: a port's or a status code's, one copy for both. */
const SLOT_INT_OPENINGS: readonly Buffer[] = SLOT_ENCODINGS.map((encodings) => Buffer.concat([encodings.openingBytes, INT_VALUE]));

/** One slot's `KeyValue`, by its slot's encodings. */
function writeSlot(slot: number, value: unknown, w: Utf8BatchWriter): void {
  if (typeof value !== 'number' || !Number.isInteger(value)) return writeEncodedKeyValue(SLOT_ENCODINGS[slot]!, value, w);
  w.bytes(SLOT_INT_OPENINGS[slot]!);
  w.integer(value);
  w.bytes(CLOSE_TWO);
}

/**
 * Slots whose values differ from call to call or are rare: each written on its own. Every stretch
 * of slots between them is a run kept as one piece (kept-runs.ts): the method, tool and operation;
 * the session, protocol version and client address; the server, transport, backend and user.
 */
const VOLATILE_SLOTS: ReadonlySet<number> = new Set([SLOT['jsonrpc.request.id'], SLOT['client.port'], SLOT['error.type'], SLOT['rpc.response.status_code'], SLOT['gen_ai.tool.call.arguments'], SLOT['gen_ai.tool.call.result']]);

/** The layout as its runs and volatile slots, in the slots' order. */
const SEGMENTS: ReadonlyArray<KeptRun | number> = segmentsOf(SPAN_KEYS.length);

function segmentsOf(slots: number): Array<KeptRun | number> {
  const segments: Array<KeptRun | number> = [];
  let start = 0;
  for (let slot = 0; slot <= slots; slot++) {
    if (slot < slots && !VOLATILE_SLOTS.has(slot)) continue;
    if (slot > start) segments.push(new KeptRun(start, slot, writeSlot));
    if (slot < slots) segments.push(slot);
    start = slot + 1;
  }
  return segments;
}

/**
 * A gateway span's attributes (span-attributes.ts), as {@link writeKeyValues} writes the object of
 * the same attributes: each slot that holds a value, in the slots' order, as its `KeyValue` — the
 * runs of slots that repeat together copied as one piece each when they repeat (kept-runs.ts).
 */
export function writeSpanAttributes(values: readonly unknown[], w: Utf8BatchWriter): void {
  w.byte(0x5b /* [ */);
  let first = true;
  for (let i = 0; i < SEGMENTS.length; i++) {
    const segment = SEGMENTS[i]!;
    if (typeof segment !== 'number') {
      first = segment.write(values, first, w);
      continue;
    }
    const value = values[segment];
    if (value === undefined) continue;
    if (!first) w.byte(0x2c /* , */);
    first = false;
    writeSlot(segment, value, w);
  }
  w.byte(0x5d /* ] */);
}

function writeKeyValue(key: string, value: unknown, w: Utf8BatchWriter): void {
  writeEncodedKeyValue(encodingsOf(key), value, w);
}

function writeEncodedKeyValue(encodings: KeptEncodings, value: unknown, w: Utf8BatchWriter): void {
  if (typeof value === 'string') return encodings.write(value, w);
  w.bytes(encodings.openingBytes);
  if (Number.isInteger(value)) {
    // A port, a status code: its digits written into the batch, as anyValue's `intValue` text.
    w.bytes(INT_VALUE);
    w.integer(value as number);
    w.bytes(CLOSE_TWO);
    return;
  }
  w.write(anyValue(value));
  w.write('}');
}
