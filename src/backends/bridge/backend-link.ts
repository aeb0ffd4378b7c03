/**
 * The bridge's connection to one stdio or legacy HTTP+SSE backend, for one session, made
 * with the SDK's own client transports (SPEC §1, backend side):
 *
 * - stdio (MCP "Transports", stdio): one child process per session, started with the
 *   configured `command`, `args` and `env` on top of the SDK's small default environment
 *   (HOME, PATH, …) — never the gateway's own environment, which holds its secrets. The
 *   child's stderr is read (a full pipe would stall it), logged at debug, and its tail kept
 *   for the log line when the child dies.
 * - sse (MCP 2024-11-05 "HTTP with SSE"): one SSE connection per session, sending the
 *   backend's static `headers`. That transport has no resumption: when the connection
 *   breaks, the backend's session is gone, so a break ends the link (the EventSource would
 *   otherwise reconnect into a new, uninitialized backend session).
 *
 * The client's token is never sent (no token passthrough, SPEC §1).
 */
import { StringDecoder } from 'node:string_decoder';
import { SSEClientTransport, SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { BackendConfig } from '../../config/schema.js';
import type { BridgeLogger } from './logger.js';

export interface BackendLink {
  readonly transport: Transport;
  /** The child's pid (stdio), for logs. */
  readonly pid?: number;
  /** The end of what the child wrote to stderr (stdio), for logs. */
  stderrTail(): string;
  /** True when `error` (from `transport.onerror`) means the backend connection is gone. */
  isConnectionLoss(error: Error): boolean;
}

/** How much of a child's stderr is kept for the log line when it dies. */
const STDERR_TAIL_CHARS = 2_000;

/**
 * Starts the backend side of a new session. Rejects, with the transport already closed,
 * when the child cannot be spawned or the SSE endpoint is not announced within `timeoutMs`.
 */
export async function openBackendLink(backend: BackendConfig, timeoutMs: number, log: BridgeLogger): Promise<BackendLink> {
  return backend.transport === 'stdio' ? openStdio(backend, timeoutMs, log) : openSse(backend, timeoutMs);
}

async function openStdio(backend: BackendConfig, timeoutMs: number, log: BridgeLogger): Promise<BackendLink> {
  const transport = new StdioClientTransport({ command: backend.command!, args: backend.args, env: backend.env, stderr: 'pipe' });
  let tail = '';
  const decoder = new StringDecoder('utf8');
  transport.stderr?.on('data', (chunk: Buffer) => {
    const text = decoder.write(chunk);
    tail = (tail + text).slice(-STDERR_TAIL_CHARS);
    log.debug({ backend: backend.name, pid: transport.pid, stderr: text.trimEnd() }, 'stdio backend stderr');
  });
  await startWithin(transport, timeoutMs, `starting "${backend.name}"`);
  return {
    transport,
    pid: transport.pid ?? undefined,
    stderrTail: () => tail.trim(),
    // The child's exit is reported through onclose; stdin/stdout errors precede it.
    isConnectionLoss: () => false,
  };
}

async function openSse(backend: BackendConfig, timeoutMs: number): Promise<BackendLink> {
  const transport = new SSEClientTransport(new URL(backend.url!), { requestInit: { headers: backend.headers } });
  await startWithin(transport, timeoutMs, `connecting to "${backend.name}"`);
  return {
    transport,
    stderrTail: () => '',
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
