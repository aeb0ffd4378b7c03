/**
 * The gateway opening a backend session of its own (MCP 2025-11-25 "Lifecycle"): `initialize`,
 * read the result out of a JSON or SSE answer, then `notifications/initialized`. Two callers
 * do it behind the client's back: a session that waited for the user's link
 * (linking/backend-session.ts) and a stateless-era client reaching a 2025-era backend
 * (stateless/legacy-sessions.ts).
 */
import type { BackendCaller, McpBackend } from './backend.js';
import { collectMessages } from './backend-body.js';
import { BackendError } from './errors.js';
import { headerValue } from '../wire/headers.js';
import { HEADER } from '../wire/protocol.js';

export interface InitializeParams {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  clientInfo: unknown;
}

export interface InitializeCall {
  authorization?: string;
  trace: { traceparent?: string; tracestate?: string };
  caller: BackendCaller;
  /** The JSON-RPC id of the `initialize` (names who asked, in the backend's logs). */
  id: string;
}

export interface OpenedBackendSession {
  backendSessionId?: string;
  /** The backend's initialize result. */
  result: Record<string, unknown>;
  /** The revision the backend chose. */
  protocolVersion: string;
}

/** The opened session, or 'unauthorized' when the backend refused the token (401). Throws BackendError otherwise. */
export async function initializeBackend(backend: McpBackend, params: InitializeParams, call: InitializeCall): Promise<OpenedBackendSession | 'unauthorized'> {
  const { authorization, trace, caller } = call;
  const res = await backend.post(JSON.stringify({ jsonrpc: '2.0', id: call.id, method: 'initialize', params }), { authorization, ...trace, caller });
  if (res.status === 401) {
    await res.body.dump().catch(() => {});
    return 'unauthorized';
  }
  if (res.status !== 200) {
    await res.body.dump().catch(() => {});
    throw new BackendError(backend.name, 'bad_status', `backend "${backend.name}" answered initialize with HTTP ${res.status}`, res.status);
  }
  const backendSessionId = headerValue(res.headers[HEADER.sessionId]);
  const { messages } = await collectMessages(res).catch((err: Error) => {
    throw new BackendError(backend.name, 'protocol', `backend "${backend.name}" sent an unreadable initialize response (${err.message})`);
  });
  const result = messages.find((m) => m.id === call.id)?.result as Record<string, unknown> | undefined;
  if (!result) throw new BackendError(backend.name, 'protocol', `backend "${backend.name}" did not accept initialize`);
  const protocolVersion = typeof result.protocolVersion === 'string' ? result.protocolVersion : params.protocolVersion;
  const initialized = await backend.post('{"jsonrpc":"2.0","method":"notifications/initialized"}', { sessionId: backendSessionId, protocolVersion, authorization, ...trace, caller });
  await initialized.body.dump().catch(() => {});
  return { backendSessionId, result, protocolVersion };
}
