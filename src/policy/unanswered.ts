/**
 * The audit's outcome of a request whose answer never came (issue 30 §2: one record for each
 * request that reaches a backend; docs/policy-and-audit.md "Record schema"):
 *
 * - `timeout` (-32011): the backend did not answer within its `timeout` — no headers, or a
 *   body that stopped arriving;
 * - `disconnected` (-32012 for a stream, -32010 before one): the backend's stream or connection
 *   ended before the response (MCP 2025-11-25 Transports: a stream that closes without the
 *   response, or a connection reset);
 * - `cancelled`: the client cancelled — the request's signal aborted, or the gateway dropped
 *   the answer before the response (the 2026-07-28 client closed its stream: MCP 2026-07-28
 *   Transports §Cancellation), recorded at the drop; a 2025 client's `notifications/cancelled`
 *   is handled by rule-policy-backend.ts. A 2025 client's disconnection is not a cancellation
 *   (MCP 2025-11-25 Transports): its answer is still read, and recorded as it ends.
 *
 * rule-policy-backend.ts settles its pending records with these when the backend call fails or
 * when the answer's body ends without them.
 */
import type { BackendResponse } from '../backends/backend.js';
import { watchedBody, withBody } from '../backends/body.js';
import { FAILURE_RPC_CODE, toBackendError } from '../backends/errors.js';
import type { AuditEvent } from '../ops/audit.js';

export type Unanswered = Pick<AuditEvent, 'outcome' | 'code'>;

/** The outcome of a failure of the backend call itself (before any answer's body). */
export function failedCall(backend: string, err: unknown, signal: AbortSignal | undefined): Unanswered {
  if (signal?.aborted) return { outcome: 'cancelled' };
  const failure = toBackendError(backend, err, 'connect');
  if (failure.failure === 'timeout') return { outcome: 'timeout', code: failure.rpcCode };
  if (failure.failure === 'unreachable') return { outcome: 'disconnected', code: failure.rpcCode };
  return { outcome: 'error', code: failure.rpcCode };
}

/**
 * `res` whose body, once it is done, calls `records.settle` with how it ended — what the records
 * still pending then get: read to the end (the stream closed without their responses:
 * disconnected), failed (timeout or disconnected), or stopped by its reader (cancelled).
 */
export function settledAtEnd(backend: string, res: BackendResponse, signal: AbortSignal | undefined, records: { settle(outcome: Unanswered): void }): BackendResponse {
  let settled = false;
  const once = (how: Unanswered) => {
    if (settled) return;
    settled = true;
    records.settle(how);
  };
  const ended = (err?: unknown) => once(err === undefined ? STREAM_ENDED : signal?.aborted ? { outcome: 'cancelled' } : streamFailure(backend, err));
  // Dropped by its reader (the 2026-07-28 client closed its stream): cancelled now, not at the backend's next event.
  return withBody(res, watchedBody(res.body, ended, () => once({ outcome: 'cancelled' })));
}

/** The outcome of the records still pending when a stream ended without their responses. */
const STREAM_ENDED: Unanswered = Object.freeze({ outcome: 'disconnected', code: FAILURE_RPC_CODE.stream_broken });

function streamFailure(backend: string, err: unknown): Unanswered {
  const failure = toBackendError(backend, err, 'stream');
  return { outcome: failure.failure === 'timeout' ? 'timeout' : 'disconnected', code: failure.rpcCode };
}
