/**
 * A stdio session's answer tied to the caller's abort signal, as an HTTP exchange with a
 * backend is (streamable-http.ts): aborted before the answer, the call rejects with the
 * backend's error; aborted after it, the answer's body is destroyed — the relay stops a stream
 * by aborting its signal (streams/stream-relay.ts), and the session must let go of it then,
 * or a standalone stream would stay taken (the next GET 409) and a POST's later lines would
 * wait for a reader that is gone.
 */
import type { BackendResponse } from '../backend.js';
import { toBackendError } from '../errors.js';

export function tiedTo(backend: string, answer: Promise<BackendResponse>, signal: AbortSignal | undefined): Promise<BackendResponse> {
  if (!signal) return answer;
  const destroyWhenAnswered = () => void answer.then((res) => res.body.destroy(), () => {});
  if (signal.aborted) {
    destroyWhenAnswered();
    return Promise.reject(toBackendError(backend, signal.reason, 'connect'));
  }
  return new Promise((resolve, reject) => {
    signal.addEventListener(
      'abort',
      () => {
        reject(toBackendError(backend, signal.reason, 'connect'));
        destroyWhenAnswered();
      },
      { once: true },
    );
    answer.then(resolve, reject);
  });
}
