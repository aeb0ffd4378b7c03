/**
 * One field's text as it repeats from record to record, kept as bytes (issue 44 part 1): an
 * audit line's `,"backend":"crm"`, a span attribute's `{"key":"switchboard.backend","value":{"stringValue":"crm"}}`.
 * Most of what a call writes — its backend, method, tool, rule, outcome, its user's digest and
 * session — is what the call before wrote. Written afresh, each value is checked for what JSON
 * escapes and copied character by character (about 30 instructions a character in V8 here:
 * bench/README.md, "Counting one function"), after its field's opening; kept, the whole field is
 * one copy of bytes, found by comparing the value with the last one, else by one `Map` lookup.
 *
 * Bounded: at most {@link VALUES_KEPT} values a field, none longer than {@link VALUE_CHARS_KEPT};
 * a further value — and every value of a field that keeps none (a request id) — is written
 * straight into the batch as it comes, by the same function that made the kept bytes: no string
 * joined only to be copied (that join, its `JSON.stringify` check and its flattening cost a span's
 * request id about 1.3 k instructions, bench/micro-count.ts `spans`, session 30). What is kept is
 * only what the records carry anyway (no token: the writers never get one), and lives as long as
 * the field's writer.
 */
import { Utf8BatchWriter } from './utf8-batch-writer.js';

/** The most values kept per field: the names of a deployment's backends, tools, rules, the active users' digests. */
const VALUES_KEPT = 64;
/** The longest value whose text is kept. */
const VALUE_CHARS_KEPT = 256;

/** Writes a string value as the field writes it (`JSON.stringify`'s text, or an OTLP `AnyValue`) and what closes the field. */
export type WriteValue = (value: string, w: Utf8BatchWriter) => void;

export class KeptEncodings {
  /** The field's opening as UTF-8 (`,"backend":`, `{"key":"…","value":`), for a value written afresh. */
  readonly openingBytes: Buffer;
  /** The whole field of each value kept, as UTF-8. */
  readonly #kept = new Map<string, Buffer>();
  /** The value last written, and its field: most records repeat it, found without the map. */
  #lastValue: string | undefined;
  #lastEncoded: Buffer | undefined;

  constructor(
    /** The field's text before its value. */
    readonly opening: string,
    /** How a value is written after the opening: straight into the record's batch, and once into the bytes kept for it. */
    private readonly writeValue: WriteValue,
    /** How many values are kept; 0 for a field whose values never repeat (a request id), which is then written afresh without a lookup. */
    private readonly capacity = VALUES_KEPT,
  ) {
    this.openingBytes = Buffer.from(opening, 'utf8');
  }

  /** Appends the field with `value` to `w`: the kept bytes when there are any, else its text, kept for next time while there is room. */
  write(value: string, w: Utf8BatchWriter): void {
    if (value === this.#lastValue) return w.bytes(this.#lastEncoded!);
    let encoded = this.capacity === 0 ? undefined : this.#kept.get(value);
    if (encoded === undefined) {
      if (this.capacity === 0 || this.#kept.size >= this.capacity || value.length > VALUE_CHARS_KEPT) {
        // Written into the batch as it comes: no string joined only to be copied (a request id's, every call).
        w.bytes(this.openingBytes);
        this.writeValue(value, w);
        return;
      }
      encoded = this.#encoded(value);
      this.#kept.set(value, encoded);
    }
    this.#lastValue = value;
    this.#lastEncoded = encoded;
    w.bytes(encoded);
  }

  /** The whole field for `value`, in bytes of its own (written into a buffer of its own: the batch's may be mid-record). */
  #encoded(value: string): Buffer {
    const own = new Utf8BatchWriter(Buffer.allocUnsafe(this.openingBytes.length + 3 * value.length + 32));
    own.bytes(this.openingBytes);
    this.writeValue(value, own);
    return own.view();
  }
}
