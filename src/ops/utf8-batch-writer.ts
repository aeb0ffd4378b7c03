/**
 * A request body made of many small strings, written as UTF-8 the moment each is made (issue 44
 * part 1, the OTLP/JSON span export: otlp-json-spans.ts). Kept apart from the encoding because
 * it is about memory, not about OTLP.
 *
 * The two obvious ways cost more than writing the text. One string grown by `+=` over a batch of
 * 512 spans is a rope of tens of thousands of parts, flattened at the end; a list of one string
 * per span keeps every span's text (and its rope) alive until the end, so it survives the young
 * generation's collections and is copied by them. Here each piece is copied into one buffer as
 * soon as it is made and dies young.
 *
 * The buffers are reused. A fresh buffer the size of a batch (about 560 KB for 512 gateway
 * spans) cost more CPU on this machine than writing the whole batch's text into it — about
 * 3.9 µs a span, the kernel's work on new pages (bench/otel-floor.ts) — and the SDK's encoder
 * pays it on every export. A {@link RequestBuffers} lends a buffer to each request being
 * written (otlp-json-batch.ts) and takes it back once that request's export has settled
 * (otlp-trace-exporter.ts); without one (tests, the bench), the text goes into the module's
 * scratch buffer and the body is a copy of its own.
 */

const FIRST_BYTES = 64 * 1024;
/** The largest buffer kept for reuse; a larger batch's is left to the garbage collector. */
const KEPT_BYTES = 2 * 1024 * 1024;
/** Buffers kept free unless told otherwise: one export in flight (span-queue.ts), one more riding out a timeout. */
const KEPT_FREE = 2;

/**
 * Pieces up to this long are copied in JavaScript when ASCII; longer ones by `Buffer.write`. A
 * `charCodeAt` costs V8 about 4 ns a character on this machine, a `Buffer.write` about 80 ns
 * whatever the length: they cross near 20 characters (issue 44 part 1, measured in session 28;
 * at 96, the bound before, a trace id's copy cost 1.5× its `Buffer.write` and a SHA-256's 3×).
 * Counted (bench/micro-count.ts, session 29), a call's two spans and audit line took 51.4 k
 * instructions with 12, 50.6 k with 16 (a span id's 16 characters copied here) and 51.8 k with 24.
 */
const SHORT_CHARS = 16;
/**
 * Encoded pieces up to this long are copied in JavaScript; longer ones by `TypedArray.prototype.set`.
 * Counted (bench/micro-count.ts, session 29), a call's two spans and its audit line took 55.9 k
 * instructions with 16, 53.8 k with 11, 52.2 k with 8, 52.0 k with 6 and 54.5 k with 4: a byte
 * copied in a JavaScript loop costs about 20 instructions here, a `set` about 130 and memcpy.
 */
const SHORT_BYTES = 8;

/**
 * Characters `JSON.stringify` would escape in a string: `"`, `\`, controls, and surrogates (a
 * lone one is escaped; a string with any takes the slow path, which handles both).
 */
export const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const QUOTE = 0x22;
/*
 * Inside a loop that runs once a character or digit, bytes are written as literals, not as these
 * constants: a module's top-level constant is a slot of the module's context to V8, which
 * TurboFan loads and checks for a small integer on every pass (about a quarter of a byte loop's
 * instructions on this machine, issue 44 part 1, session 29).
 */
const BILLION = 1_000_000_000;
/** 10^k for k = 0…9: whether a number has more than k digits. */
const POWERS_OF_TEN = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, BILLION];

let scratch = Buffer.allocUnsafeSlow(FIRST_BYTES);

export class Utf8BatchWriter {
  #buffer: Buffer;
  #length = 0;

  /** Writes into `buffer` (grown when needed), or the module's scratch buffer. */
  constructor(buffer?: Buffer) {
    this.#buffer = buffer ?? scratch;
  }

  /**
   * Appends `text` as UTF-8 (a UTF-16 code unit is at most 3 bytes). A short ASCII piece — most
   * of a span's — is copied here, code unit by code unit: `Buffer.write` is a call into C++
   * that first flattens a concatenated string, and a span written as one concatenation cost more
   * in that flattening than in anything else it did (bench/governance-instructions.ts).
   */
  write(text: string): void {
    const n = text.length;
    const needed = this.#length + 3 * n;
    if (needed > this.#buffer.length) this.#grow(needed);
    if (n <= SHORT_CHARS && this.#ascii(text, n)) return;
    this.#length += this.#buffer.write(text, this.#length, 'utf8');
  }

  /**
   * Appends `text` as a JSON string literal, `"` + text + `"`, and returns true — when nothing in
   * it is escaped by `JSON.stringify` (and, when short, all of it is ASCII); else writes nothing
   * and returns false (the caller writes `JSON.stringify(text)` instead). A short one is checked
   * and copied in one pass; a longer one is checked by {@link NEEDS_ESCAPE} and written by
   * `Buffer.write`.
   */
  quoted(text: string): boolean {
    const n = text.length;
    if (n > SHORT_CHARS) return this.#quotedLong(text, n);
    const needed = this.#length + n + 2;
    if (needed > this.#buffer.length) this.#grow(needed);
    const buffer = this.#buffer;
    let at = this.#length;
    buffer[at++] = QUOTE;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === 0x22 /* " */ || c === 0x5c /* \\ */) return false;
      buffer[at++] = c;
    }
    buffer[at++] = QUOTE;
    this.#length = at;
    return true;
  }

  #quotedLong(text: string, n: number): boolean {
    if (NEEDS_ESCAPE.test(text)) return false;
    const needed = this.#length + 3 * n + 2;
    if (needed > this.#buffer.length) this.#grow(needed);
    const buffer = this.#buffer;
    buffer[this.#length] = QUOTE;
    const at = this.#length + 1 + buffer.write(text, this.#length + 1, 'utf8');
    buffer[at] = QUOTE;
    this.#length = at + 1;
    return true;
  }

  /** Appends `text` as a JSON string literal, exactly as `JSON.stringify(text)` writes it. */
  jsonString(text: string): void {
    if (!this.quoted(text)) this.write(JSON.stringify(text));
  }

  /** Appends one ASCII character, by its code (a quote, a bracket, a comma). */
  byte(code: number): void {
    if (this.#length >= this.#buffer.length) this.#grow(this.#length + 1);
    this.#buffer[this.#length++] = code;
  }

  /**
   * Appends a non-negative integer below 2^53 in decimal, left-padded with zeros to `width`
   * digits: its digits written straight into the buffer, with no string made for them (a span's
   * times, kind, status and flags: about 3 k instructions a call went to `String(n)` and its
   * copy). The digits are taken in 32-bit integer arithmetic, nine at a time: a `%` of a number
   * past 2^31 is a call into C in V8. Anything else is written as `String(n)`.
   */
  integer(n: number, width = 1): void {
    if (!Number.isSafeInteger(n) || n < 0) return this.write(String(n));
    if (n < BILLION) return this.#digits(n, width);
    const high = Math.floor(n / BILLION);
    this.#digits(high, width - 9);
    this.#digits(n - high * BILLION, 9);
  }

  /** Appends `n` (0 ≤ n < 10^9) in decimal, left-padded with zeros to `width` digits. */
  #digits(n: number, width: number): void {
    // Digits counted only when `n` has more than `width` of them (nanoseconds, 9 wide, never do).
    let count = width;
    if (width < 1 || width > 9 || n >= POWERS_OF_TEN[width]!) {
      count = 1;
      for (let rest = n; rest >= 10; rest = (rest / 10) | 0) count++;
    }
    const needed = this.#length + Math.max(count, width);
    if (needed > this.#buffer.length) this.#grow(needed);
    const buffer = this.#buffer;
    let rest = n | 0;
    for (let at = needed - 1; at >= this.#length; at--) {
      const next = (rest / 10) | 0;
      buffer[at] = 0x30 /* 0 */ + rest - next * 10;
      rest = next;
    }
    this.#length = needed;
  }

  /**
   * Appends bytes already encoded (a kept encoding: kept-encodings.ts). Up to
   * {@link SHORT_BYTES} are copied here, byte by byte: `TypedArray.prototype.set` costs about
   * 130 instructions a call and memcpy, a byte copied here about 20 (the counts at SHORT_BYTES).
   */
  bytes(bytes: Uint8Array): void {
    const n = bytes.length;
    const needed = this.#length + n;
    if (needed > this.#buffer.length) this.#grow(needed);
    if (n > SHORT_BYTES) this.#buffer.set(bytes, this.#length);
    else {
      const buffer = this.#buffer;
      for (let i = 0, at = this.#length; i < n; i++, at++) buffer[at] = bytes[i]!;
    }
    this.#length = needed;
  }

  /** Copies `text` when it is all ASCII (true); else leaves the length as it was (false). */
  #ascii(text: string, n: number): boolean {
    const buffer = this.#buffer;
    let at = this.#length;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c > 0x7f) return false;
      buffer[at++] = c;
    }
    this.#length = at;
    return true;
  }

  #grow(needed: number): void {
    const bigger = Buffer.allocUnsafeSlow(Math.max(needed, 2 * this.#buffer.length));
    this.#buffer.copy(bigger, 0, 0, this.#length);
    if (this.#buffer === scratch) scratch = bigger;
    this.#buffer = bigger;
  }

  /** Bytes written so far. */
  get length(): number {
    return this.#length;
  }

  /** Forgets what was written after the first `length` bytes (a record that failed halfway). */
  truncate(length: number): void {
    if (length >= 0 && length < this.#length) this.#length = length;
  }

  /** The buffer written into (grown or not): what goes back to its {@link RequestBuffers}. */
  get buffer(): Buffer {
    return this.#buffer;
  }

  /** The bytes written, as a view of the buffer: valid until the buffer is written again. */
  view(): Buffer {
    return this.#buffer.subarray(0, this.#length);
  }

  /** The bytes written, in a buffer of their own. */
  copy(): Buffer {
    const out = Buffer.allocUnsafe(this.#length);
    this.#buffer.copy(out, 0, 0, this.#length);
    if (this.#buffer === scratch && scratch.length > KEPT_BYTES) scratch = Buffer.allocUnsafeSlow(FIRST_BYTES);
    return out;
  }
}

/** Request buffers lent out and taken back: a buffer is written again only after it was given back. */
export class RequestBuffers {
  #free: Buffer[] = [];

  /** `kept`: how many free buffers are kept at most (the requests a queue holds at once). */
  constructor(private readonly kept = KEPT_FREE) {}

  take(): Buffer {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(FIRST_BYTES);
  }

  give(buffer: Buffer): void {
    if (buffer.length <= KEPT_BYTES && this.#free.length < this.kept) this.#free.push(buffer);
  }
}
