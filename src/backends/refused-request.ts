/**
 * A backend's HTTP 4xx answer that is the JSON-RPC error of the request it was sent (issue 42
 * cause 9). A 2026-07-28 server answers some errors about the request itself with HTTP 400 and
 * the error under the request's id: -32020 (a `Mcp-Param-*` header that does not match the body,
 * Transports §Custom Headers from Tool Parameters), -32602, -32021. That error is the backend's
 * answer to the client and must reach it as written — not a gateway error that says only
 * "answered HTTP 400". Where the client speaks 2025-11-25, it reaches it in HTTP 200: that
 * revision answers a request's error as its response (Transports §Sending Messages to the
 * Server), and the SDK client takes a 4xx for a failed POST, losing the error.
 *
 * Read strictly (backends/strict-answer.ts, issue 41 §1): one JSON object, no byte-order mark,
 * exactly the id sent (`"1"` is not `1`), an error object with an integer code and a string
 * message. Anything else is not the request's error; the caller reports the status as before,
 * with the bytes read kept for it.
 */
import type { BackendResponse } from './backend.js';
import { MAX_MESSAGE_BYTES } from './backend-messages.js';
import { bytesWithin, syntheticBody, withBody } from './body.js';
import { parseStrictly, startsWithBom } from './strict-answer.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';

/** The statuses a request's own error may come with: a 4xx that is not about the token (401, 403: re-link, step-up) nor a lost session (404). */
export function mayCarryRequestError(res: BackendResponse): boolean {
  return res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403 && res.status !== 404 && res.contentType === 'application/json';
}

/** The JSON-RPC error the answer gives request `id`, or the answer again (its bytes kept) when it is not one. */
export async function requestErrorOf(res: BackendResponse, id: JsonRpcId): Promise<{ error: JsonRpcMessage } | { res: BackendResponse }> {
  const bytes = await bytesWithin(res.body, MAX_MESSAGE_BYTES);
  if (!bytes) return { res: withBody(res, syntheticBody('')) };
  const text = bytes.toString('utf8');
  const again = { res: withBody(res, syntheticBody(text)) };
  if (startsWithBom(bytes)) return again;
  let value: unknown;
  try {
    value = parseStrictly(text);
  } catch {
    return again;
  }
  return isErrorFor(value, id) ? { error: value } : again;
}

function isErrorFor(value: unknown, id: JsonRpcId): value is JsonRpcMessage {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
  const m = value as Record<string, unknown>;
  if (m.jsonrpc !== '2.0' || m.id !== id || 'result' in m || 'method' in m) return false;
  const error = m.error as Record<string, unknown> | null | undefined;
  return !!error && typeof error === 'object' && Number.isInteger(error.code) && typeof error.message === 'string';
}

/** The error with the backend named in `data` (whose object it joins; other data is kept under `data.data`). */
export function namingBackend(error: JsonRpcMessage, backend: string): JsonRpcMessage {
  const { data, ...rest } = error.error as { code: number; message: string; data?: unknown };
  const named = data === undefined ? { backend } : data !== null && typeof data === 'object' && !Array.isArray(data) ? { ...(data as object), backend } : { backend, data };
  return { ...error, error: { ...rest, data: named } };
}
