/**
 * A request body made of many small strings, written as UTF-8 the moment each is made (issue 44
 * part 1, the OTLP/JSON span export: otlp-json-spans.ts). Kept apart from the encoding because
 * it is about the garbage collector, not about OTLP.
 *
 * The two obvious ways cost more than writing the text. One string grown by `+=` over a batch of
 * 512 spans is a rope of tens of thousands of parts, flattened at the end; a list of one string
 * per span keeps every span's text (and its rope) alive until the end, so it survives the young
 * generation's collections and is copied by them. Here each piece is copied into one scratch
 * buffer as soon as it is made and dies young; the request is one copy of the bytes written.
 *
 * The scratch buffer is the module's, reused by every batch: writing is synchronous, and the
 * body handed to the transport is always a copy of its own. It grows to the largest batch, and
 * goes back to its first size after a batch larger than {@link KEPT_BYTES}.
 */

const FIRST_BYTES = 64 * 1024;
/** The most the scratch buffer is kept at between batches. */
const KEPT_BYTES = 1024 * 1024;

let scratch = Buffer.allocUnsafeSlow(FIRST_BYTES);

export class Utf8BatchWriter {
  #length = 0;

  /** Appends `text` as UTF-8 (a UTF-16 code unit is at most 3 bytes). */
  write(text: string): void {
    const needed = this.#length + 3 * text.length;
    if (needed > scratch.length) this.#grow(needed);
    this.#length += scratch.write(text, this.#length, 'utf8');
  }

  #grow(needed: number): void {
    const bigger = Buffer.allocUnsafeSlow(Math.max(needed, 2 * scratch.length));
    scratch.copy(bigger, 0, 0, this.#length);
    scratch = bigger;
  }

  /** The bytes written, in a buffer of their own; the writer is done. */
  bytes(): Buffer {
    const out = Buffer.allocUnsafe(this.#length);
    scratch.copy(out, 0, 0, this.#length);
    this.#length = 0;
    if (scratch.length > KEPT_BYTES) scratch = Buffer.allocUnsafeSlow(FIRST_BYTES);
    return out;
  }
}
