/**
 * The bridge's connection to one legacy HTTP+SSE backend, for one session, made with the
 * SDK's own client transport (SPEC §1, backend side; stdio backends are spoken to directly,
 * stdio-child.ts): one SSE connection per session (MCP 2024-11-05 "HTTP with SSE"), sending
 * the backend's static `headers`. That transport has no resumption: when the connection
 * breaks, the backend's session is gone, so a break ends the link (the EventSource would
 * otherwise reconnect into a new, uninitialized backend session).
 *
 * The client's token is never sent (no token passthrough, SPEC §1).
 */
import { SSEClientTransport, SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { BackendConfig } from '../../config/schema.js';

export interface BackendLink {
  readonly transport: Transport;
  /** True when `error` (from `transport.onerror`) means the backend connection is gone. */
  isConnectionLoss(error: Error): boolean;
}

/**
 * Starts the backend side of a new session. Rejects, with the transport already closed,
 * when the SSE endpoint is not announced within `timeoutMs`.
 */
export async function openBackendLink(backend: BackendConfig, timeoutMs: number): Promise<BackendLink> {
  const transport = new SSEClientTransport(new URL(backend.url!), { requestInit: { headers: backend.headers } });
  await startWithin(transport, timeoutMs, `connecting to "${backend.name}"`);
  return {
    transport,
    // SseError is what the EventSource reports when the stream ends or fails; POST
    // failures are plain Errors and leave the connection up.
    isConnectionLoss: (error) => error instanceof SseError,
  };
}

async function startWithin(transport: Transport, timeoutMs: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${timeoutMs} ms`)), timeoutMs);
  });
  // Errors during start are reported through the rejection; keep onerror quiet until then.
  transport.onerror = () => {};
  try {
    await Promise.race([transport.start(), timeout]);
  } catch (err) {
    await transport.close().catch(() => {});
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
