/**
 * A backend's failure is the backend's, never the client's (STYLE: agentgateway's typed
 * upstream errors). The MCP layer turns these into JSON-RPC errors for open requests, or
 * HTTP 502/504 where no request is open.
 */
export type BackendFailure = 'timeout' | 'unreachable' | 'bad_status' | 'stream_broken' | 'protocol' | 'token_exchange';

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

  /** `error.data` of the JSON-RPC error that reports it (OpenAPI `BackendErrorData`). */
  get data(): Record<string, unknown> {
    return { backend: this.backend, reason: this.failure, ...(this.status ? { status: this.status } : {}), ...this.detail };
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
  const code = errorCode(err);
  if (code && TIMEOUT_CODES.has(code)) return new BackendError(backend, 'timeout', `backend "${backend}" did not answer in time`);
  if (phase === 'stream') return new BackendError(backend, 'stream_broken', `backend "${backend}" stream broke (${code ?? (err as Error).message})`);
  if (code && UNREACHABLE_CODES.has(code)) return new BackendError(backend, 'unreachable', `backend "${backend}" is unreachable (${code})`);
  return new BackendError(backend, 'unreachable', `backend "${backend}" request failed (${code ?? (err as Error)?.message ?? 'unknown error'})`);
}

function errorCode(err: unknown): string | undefined {
  let e = err as { code?: string; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string') return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}
