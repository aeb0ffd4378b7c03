/**
 * The ratio's decision for a root span, and the ids of the spans the gateway makes (issue 44
 * part 1: governance at sampling 0.1 should cost little more than sampling 0). A root not
 * sampled costs four random words and the decision; nothing else is made for it.
 *
 * The decision is the SDK's: a trace id is drawn and judged as the SDK's
 * `TraceIdRatioBasedSampler` — the sampler a `ParentBasedSampler` uses for roots — judges it,
 * and a sampled root gets that very id, so trace ids stay ratio-consistent, as another service
 * sampling by trace id expects. That sampler reads the id's four 8-digit words, XORs them and
 * samples when the result is below `floor(ratio × 0xffffffff)`; the words are the four random
 * words drawn here, so the decision is taken on them, and the id's 32 digits are written only
 * for a root that is sampled (at sampling 0.1, nine roots in ten cost four random words and a
 * comparison: issue 44 part 1). test/telemetry/root-sampling.test.ts holds the decision to the
 * SDK sampler's on the same ids. Decided per root only: a span with a parent follows the
 * parent's flag (otel-sdk.ts startSpan, as `ParentBasedSampler`'s defaults do).
 */

export class RootSampling {
  /** The SDK sampler's bound: a root whose words XOR to less is sampled (every root from ratio 1 up). */
  readonly #upperBound: number;

  constructor(readonly ratio: number) {
    this.#upperBound = ratio >= 1 ? 0x100000000 : ratio > 0 ? Math.floor(ratio * 0xffffffff) : 0;
  }

  /** The trace id of a root span to be recorded; undefined when the ratio does not sample it (always at ratio 0). */
  admit(): string | undefined {
    if (this.ratio <= 0) return undefined;
    const a = word();
    const b = word();
    const c = word();
    let d = word();
    if (a === 0 && b === 0 && c === 0 && d === 0) d = 1;
    return (a ^ b ^ c ^ d) >>> 0 < this.#upperBound ? traceIdOf(a, b, c, d) : undefined;
  }

  /** A new span id (16 hex digits), as the SDK's tracer draws them. */
  spanId(): string {
    return randomSpanId();
  }
}

/*
 * Ids drawn as the SDK's `RandomIdGenerator` draws them — 32-bit words of `Math.random()`, an
 * all-zero id (invalid in W3C Trace Context) made valid by a last byte of 1 — but written as
 * lowercase hex here, each digit a character code, into one flat string: the SDK's generator
 * writes the words into a buffer and calls `toString('hex')` into C++, about 1.5 k instructions
 * an id against about 1 k (three ids a sampled call; issue 44 part 1).
 */

/** Lowercase hex digits by value. */
const DIGITS = '0123456789abcdef';

/** A random unsigned 32-bit word. */
const word = () => (Math.random() * 4294967296) >>> 0;

/** The hex digit of `x` at bit `shift` (28, 24, …, 0). */
const digit = (x: number, shift: number) => DIGITS.charCodeAt((x >>> shift) & 15);

/** A span id: 16 hex digits of two random words. */
function randomSpanId(): string {
  const a = word();
  let b = word();
  if (a === 0 && b === 0) b = 1;
  return String.fromCharCode(
    digit(a, 28), digit(a, 24), digit(a, 20), digit(a, 16), digit(a, 12), digit(a, 8), digit(a, 4), digit(a, 0),
    digit(b, 28), digit(b, 24), digit(b, 20), digit(b, 16), digit(b, 12), digit(b, 8), digit(b, 4), digit(b, 0),
  );
}

/** A trace id: the 32 hex digits of four words. */
function traceIdOf(a: number, b: number, c: number, d: number): string {
  return String.fromCharCode(
    digit(a, 28), digit(a, 24), digit(a, 20), digit(a, 16), digit(a, 12), digit(a, 8), digit(a, 4), digit(a, 0),
    digit(b, 28), digit(b, 24), digit(b, 20), digit(b, 16), digit(b, 12), digit(b, 8), digit(b, 4), digit(b, 0),
    digit(c, 28), digit(c, 24), digit(c, 20), digit(c, 16), digit(c, 12), digit(c, 8), digit(c, 4), digit(c, 0),
    digit(d, 28), digit(d, 24), digit(d, 20), digit(d, 16), digit(d, 12), digit(d, 8), digit(d, 4), digit(d, 0),
  );
}
