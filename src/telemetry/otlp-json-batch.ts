/**
 * One OTLP/JSON export request, written span by span as each span ends (issue 44 part 1): the
 * span queue (span-queue.ts) holds these, not the spans. A span is encoded the moment it ends
 * and its objects — the record, its attributes, its ids — die young; what waits for the export is
 * bytes in a buffer outside the JavaScript heap. Spans kept as objects until their batch left
 * (up to 512 of them, a few hundred milliseconds under load) survived the young generation's
 * collections and were copied by each: on the governed gateway the collector ran about 3.4 times
 * the instructions per call it runs on the plain one (bench/governance-instructions.ts).
 *
 * A request holds the spans of one resource and one instrumentation scope (every span of the
 * gateway has the same two objects); a span of another is the start of the next request
 * ({@link TraceRequestBatch.takes}). The text is the one otlp-json-spans.ts writes for those spans
 * as one group, so the collector receives the same document as from the SDK's serializer.
 *
 * The buffer is lent by a {@link RequestBuffers} and given back by {@link TraceRequestBatch.release}
 * once the export that sent it has settled (otlp-trace-exporter.ts) or the batch was dropped.
 */
import type { EncodableSpan } from './recorded-span.js';
import { resourceClosing, resourceOpening, scopeClosing, scopeOpening, writeSpan, type Resource, type Scope } from './otlp-json-spans.js';
import { Utf8BatchWriter, type RequestBuffers } from '../ops/utf8-batch-writer.js';

export class TraceRequestBatch {
  readonly #resource: Resource;
  readonly #scope: Scope;
  readonly #buffers: RequestBuffers;
  #writer: Utf8BatchWriter | undefined;
  #count = 0;
  #closed = false;

  /** A request opened for the spans of `first`'s resource and scope (`first` is not added). */
  constructor(first: EncodableSpan, buffers: RequestBuffers) {
    this.#resource = first.resource;
    this.#scope = first.instrumentationScope;
    this.#buffers = buffers;
    this.#writer = new Utf8BatchWriter(buffers.take());
    this.#writer.write(`{"resourceSpans":[${resourceOpening(this.#resource)}${scopeOpening(this.#scope)}`);
  }

  /** How many spans the request holds. */
  get count(): number {
    return this.#count;
  }

  /** Whether `span` can be added: the request is open, and the span has its resource and scope. */
  takes(span: EncodableSpan): boolean {
    return !this.#closed && span.resource === this.#resource && span.instrumentationScope === this.#scope;
  }

  /** Writes `span` into the request (only when {@link takes} says so). */
  add(span: EncodableSpan): void {
    const w = this.#writer!;
    if (this.#count) w.write(',');
    writeSpan(span, w);
    this.#count++;
  }

  /** Closes the request: nothing more is added. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#writer!.write(`${scopeClosing(this.#scope)}${resourceClosing(this.#resource)}]}`);
  }

  /** The request's bytes, closed first: a view of the lent buffer, valid until {@link release}. */
  bytes(): Buffer {
    this.close();
    return this.#writer!.view();
  }

  /** Gives the buffer back to be written again (once; the bytes are not read after this). */
  release(): void {
    if (this.#writer) this.#buffers.give(this.#writer.buffer);
    this.#writer = undefined;
  }
}
