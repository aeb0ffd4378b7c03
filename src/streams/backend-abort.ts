/**
 * The abort signal of a relay's backend requests, made only when a request asks for it and let
 * go when none is in flight. An `AbortController`, its signal and the signal's listener maps
 * come to about 0.6 KiB, which every idle standalone stream kept though there was nothing to
 * abort: a backend without a standalone stream (405) leaves the gateway's own stream, with no
 * backend request behind it (issue 29, bench/README.md "Memory per idle stream").
 */
export class BackendAbort {
  #controller: AbortController | undefined;
  #aborted = false;

  /** The signal for a backend request; already aborted when {@link abort} was called. */
  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.#aborted && !this.#controller.signal.aborted) this.#controller.abort();
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  abort(): void {
    this.#aborted = true;
    this.#controller?.abort();
  }

  /** No backend request is in flight any more: the controller goes; a later request gets a new one. */
  release(): void {
    if (!this.#aborted) this.#controller = undefined;
  }
}
