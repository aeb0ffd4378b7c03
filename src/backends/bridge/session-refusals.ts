/**
 * What a bridged backend's `initialize` is told when no session can be opened for it, the
 * same for a stdio child (stdio-backend.ts) and a legacy SSE connection (bridge-server.ts):
 * the backend being full is the server's state (HTTP 503); a user past their share is theirs
 * to resolve, and a backend that did not start is a JSON-RPC answer to `initialize` — both
 * passed on by the gateway as they are (HTTP 200).
 */
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { BackendConfig } from '../../config/schema.js';
import { ErrorCode, errorResponse, type JsonRpcMessage } from '../../wire/jsonrpc.js';
import type { BridgeLogger } from './logger.js';
import type { SessionSlots, SlotRefusal } from './session-slots.js';

/** What a user key looks like (src/auth/principal.ts userKeyOf); anything else counts as no user. */
const USER_KEY = /^[A-Za-z0-9_-]{1,64}$/;

/** The user a slot is taken for: a well-formed user key, else none (counted towards the backend's cap only). */
export function slotUser(userKey: string | undefined): string | undefined {
  return userKey !== undefined && USER_KEY.test(userKey) ? userKey : undefined;
}

/** The status and JSON-RPC error that refuse an `initialize` over a cap; logged here. */
export function capRefusal(backend: BackendConfig, slots: SessionSlots, refusal: SlotRefusal, initializeId: RequestId, log: BridgeLogger): { status: number; message: JsonRpcMessage } {
  const { max, maxPerUser } = slots;
  if (refusal === 'backend') {
    log.warn({ backend: backend.name, max }, 'bridge: session limit reached (bridge.maxSessions); initialize refused');
    return { status: 503, message: errorResponse(initializeId, ErrorCode.BackendUnavailable, `backend "${backend.name}" has too many open sessions (at most ${max}); try again later`) };
  }
  log.warn({ backend: backend.name, maxPerUser }, "bridge: a user's session limit reached (bridge.maxSessionsPerUser); initialize refused");
  const text = `you have too many open sessions with backend "${backend.name}" (at most ${maxPerUser}); end one (DELETE) or let one go idle, then try again`;
  return { status: 200, message: errorResponse(initializeId, ErrorCode.BackendUnavailable, text) };
}

/** The JSON-RPC answer to `initialize` of a backend that could not be started (the full error logged). */
export function startFailure(backend: BackendConfig, initializeId: RequestId, err: unknown, log: BridgeLogger): JsonRpcMessage {
  log.warn({ backend: backend.name, transport: backend.transport, err: (err as Error).message }, 'bridge: backend could not be started');
  return errorResponse(initializeId, ErrorCode.BackendUnavailable, `backend "${backend.name}" could not be started: ${describeStartFailure(err)}`);
}

/** What the client is told about a backend that did not start. */
function describeStartFailure(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (code === 'ENOENT') return 'its command was not found (ENOENT)';
  if (code === 'EACCES') return 'its command is not executable (EACCES)';
  if (typeof code === 'string') return code;
  if (typeof code === 'number') return `the backend answered HTTP ${code}`;
  return (err as Error).message ?? 'unknown error';
}
