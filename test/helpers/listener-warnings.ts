/**
 * Node's MaxListenersExceededWarning, caught for a test of an in-process gateway: Node prints
 * it (once per emitter) when an eleventh listener is added to one event, which in the gateway's
 * log reads as a leak. A test watches while it works, then asks what was warned.
 */
export interface ListenerWarnings {
  /** The warnings' messages so far, once the warnings of the last tick were emitted (Node emits them on the next one). */
  messages(): Promise<string[]>;
  /** Stops watching. */
  stop(): void;
}

export function watchListenerWarnings(): ListenerWarnings {
  const seen: string[] = [];
  const onWarning = (warning: Error) => {
    if (warning.name === 'MaxListenersExceededWarning') seen.push(warning.message);
  };
  process.on('warning', onWarning);
  return {
    async messages() {
      await new Promise((resolve) => setImmediate(resolve));
      return [...seen];
    },
    stop: () => process.off('warning', onWarning),
  };
}
