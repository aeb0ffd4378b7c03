/**
 * A minimal 2025-11-25 client of one gateway endpoint, by hand over fetch, for tests that
 * open many sessions and look at which ones still answer (sessions.maxPerUser: session-budget,
 * session-eviction).
 */
import assert from 'node:assert/strict';

export const SESSION_VERSION = '2025-11-25';

export interface SessionClient {
  /** POSTs one JSON-RPC message, with the session's headers when `sessionId` is given. */
  post(token: string, body: unknown, sessionId?: string, signal?: AbortSignal): Promise<Response>;
  /** What a client that connects does: initialize, then initialized; returns the session id. */
  initialize(token: string, capabilities?: Record<string, unknown>): Promise<string>;
  /** The HTTP status of a ping in the session (200 alive, 404 gone). */
  pingStatus(token: string, sessionId: string): Promise<number>;
}

export function sessionClient(endpoint: () => URL, clientName: string): SessionClient {
  const post = (token: string, body: unknown, sessionId?: string, signal = AbortSignal.timeout(20_000)): Promise<Response> => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    if (sessionId) Object.assign(headers, { 'mcp-session-id': sessionId, 'mcp-protocol-version': SESSION_VERSION });
    return fetch(endpoint(), { method: 'POST', headers, body: JSON.stringify(body), signal });
  };
  return {
    post,
    async initialize(token, capabilities = {}) {
      const params = { protocolVersion: SESSION_VERSION, capabilities, clientInfo: { name: clientName, version: '1' } };
      const res = await post(token, { jsonrpc: '2.0', id: 1, method: 'initialize', params });
      assert.equal(res.status, 200, await res.clone().text());
      await res.text();
      const sessionId = res.headers.get('mcp-session-id')!;
      const initialized = await post(token, { jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId);
      assert.equal(initialized.status, 202);
      await initialized.text();
      return sessionId;
    },
    async pingStatus(token, sessionId) {
      const res = await post(token, { jsonrpc: '2.0', id: 'p', method: 'ping' }, sessionId);
      await res.text();
      return res.status;
    },
  };
}
