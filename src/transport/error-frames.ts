/**
 * How refusals of the Streamable HTTP endpoint reach a WebSocket client. Over HTTP a status
 * code carries them; a WebSocket has only frames and close codes (RFC 6455 §7.4), so:
 *  - the HTTP error of a request becomes a JSON-RPC error frame answering that request's id,
 *    with the gateway's own JSON-RPC error when the body has one (e.g. -32013 state
 *    unavailable), else -32600/-32603 from the status, and `data.status` (plus
 *    `data.retryAfter` for 429/503) so that nothing the HTTP client would have seen is lost;
 *  - states the connection cannot outlive close the socket instead: the session is gone
 *    (404 once a session exists) or the token is no longer accepted (401), both 1008
 *    (policy violation) with a reason that says what to do.
 */
import { ErrorCode, errorResponse, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';

/** RFC 6455 §7.4.1 close codes the bridge uses. */
export const CloseCode = {
  normal: 1000,
  goingAway: 1001,
  policyViolation: 1008,
  internalError: 1011,
} as const;

export interface CloseInstruction {
  code: number;
  reason: string;
}

export interface HttpRefusal {
  status: number;
  /** The response body as text (may be empty or not JSON). */
  body: string;
  retryAfter?: string;
}

/** Ends the connection for answers it cannot outlive; undefined when a frame is enough. */
export function closeFor(refusal: HttpRefusal, sessionKnown: boolean): CloseInstruction | undefined {
  if (refusal.status === 401) return { code: CloseCode.policyViolation, reason: 'token no longer accepted; reconnect with a valid token' };
  if (refusal.status === 404 && sessionKnown) return { code: CloseCode.policyViolation, reason: 'MCP session not found; reconnect and initialize again' };
  return undefined;
}

/** The JSON-RPC error answering request `id` for an HTTP refusal of its POST. */
export function errorFrameFor(id: JsonRpcId, refusal: HttpRefusal): JsonRpcMessage {
  const parsed = parseObject(refusal.body);
  const data = { status: refusal.status, ...(refusal.retryAfter ? { retryAfter: refusal.retryAfter } : {}) };
  const gatewayError = isObject(parsed?.error) ? parsed.error : undefined;
  if (gatewayError && typeof gatewayError.code === 'number' && typeof gatewayError.message === 'string') {
    return errorResponse(id, gatewayError.code, gatewayError.message, { ...(isObject(gatewayError.data) ? gatewayError.data : {}), ...data });
  }
  // OAuth-style bodies ({error, error_description}) from the authorization gate, or anything else.
  const description =
    typeof parsed?.error_description === 'string' ? parsed.error_description : typeof parsed?.error === 'string' ? parsed.error : parsed ? '' : refusal.body.slice(0, 200);
  const code = refusal.status >= 500 ? ErrorCode.InternalError : ErrorCode.InvalidRequest;
  return errorResponse(id, code, `HTTP ${refusal.status}${description ? `: ${description}` : ''}`, data);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseObject(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A close reason must fit in 123 bytes of UTF-8 (RFC 6455 §5.5: control frames ≤ 125 bytes). */
export function closeReason(text: string): string {
  let reason = text;
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1);
  return reason;
}
