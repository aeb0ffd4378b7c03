/**
 * A promise that the caller's signal can end early: it settles as `promise` does, or rejects
 * with the signal's reason as soon as the signal aborts. The work behind `promise` goes on
 * (it may be shared with other callers, as an era probe is, era.ts); only this caller stops
 * waiting for it. The abort listener is removed once the promise settles, so a long-lived
 * signal does not collect one listener per call.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('the caller stopped waiting');
}
