/**
 * A backend's failure is the backend's, never the client's (STYLE: agentgateway's typed
 * upstream errors). This file is the one table from a failure to what the client gets:
 * a JSON-RPC error (`rpcCode`, `rpcData`) for each open request, or HTTP 502/504
 * (`httpStatus`) where no request is open (OpenAPI "Gateway error codes", docs/http-surface.md "Errors").
 * http/replies.ts, the stream relay, the aggregated backend and the WebSocket bridge all
 * answer through it, so a failure gets the same code on every path.
 */
import { errorCauseCode } from '../wire/error-cause.js';
import { ErrorCode, errorResponse, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';

export type BackendFailure = 'timeout' | 'unreachable' | 'bad_status' | 'stream_broken' | 'protocol' | 'token_exchange';

/**
 * The JSON-RPC code of each failure (OpenAPI `GatewayErrorCode`): -32011 when the backend did
 * not answer in time, -32012 when its SSE stream ended before the response (MCP 2025-11-25
 * "Resumability and Redelivery": a stream that cannot be resumed), else -32010.
 */
export const FAILURE_RPC_CODE: Readonly<Record<BackendFailure, number>> = {
  timeout: ErrorCode.BackendTimeout,
  unreachable: ErrorCode.BackendUnavailable,
  bad_status: ErrorCode.BackendUnavailable,
  protocol: ErrorCode.BackendUnavailable,
  stream_broken: ErrorCode.BackendStreamBroken,
  token_exchange: ErrorCode.BackendUnavailable,
};

export class BackendError extends Error {
  constructor(
    readonly backend: string,
    readonly failure: BackendFailure,
    message: string,
    readonly status?: number,
    /** More for the client in `error.data` (a failed token exchange: its outcome and `signInAgain`). */
    readonly detail?: Readonly<Record<string, unknown>>,
  ) {
    super(message);
    this.name = 'BackendError';
  }

  /** `error.code` of the JSON-RPC error that reports it (the table above). */
  get rpcCode(): number {
    return FAILURE_RPC_CODE[this.failure];
  }

  /** `error.data` of the JSON-RPC error that reports it (OpenAPI `BackendErrorData`). */
  get rpcData(): Record<string, unknown> {
    return { backend: this.backend, reason: this.failure, ...(this.status ? { status: this.status } : {}), ...this.detail };
  }

  /** The same as {@link rpcData}, by the name the exchange tests read it. */
  get data(): Record<string, unknown> {
    return this.rpcData;
  }

  /** The JSON-RPC error that answers request `id` (null: no request to answer) with this failure. */
  rpcError(id: JsonRpcId | null): JsonRpcMessage {
    return errorResponse(id, this.rpcCode, this.message, this.rpcData);
  }

  /** HTTP status for the client when no JSON-RPC request is open to carry the error. */
  get httpStatus(): 502 | 504 {
    return this.failure === 'timeout' ? 504 : 502;
  }
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'EPIPE']);

/** Classifies an undici / network error into a BackendError. */
export function toBackendError(backend: string, err: unknown, phase: 'connect' | 'stream'): BackendError {
  if (err instanceof BackendError) return err;
  const code = errorCauseCode(err);
  if (code && TIMEOUT_CODES.has(code)) return new BackendError(backend, 'timeout', `backend "${backend}" did not answer in time`);
  if (phase === 'stream') return new BackendError(backend, 'stream_broken', `backend "${backend}" stream broke (${code ?? (err as Error).message})`);
  if (code && UNREACHABLE_CODES.has(code)) return new BackendError(backend, 'unreachable', `backend "${backend}" is unreachable (${code})`);
  return new BackendError(backend, 'unreachable', `backend "${backend}" request failed (${code ?? (err as Error)?.message ?? 'unknown error'})`);
}
