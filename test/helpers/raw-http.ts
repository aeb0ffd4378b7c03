/**
 * A raw HTTP/1.1 connection for tests that must send what no HTTP client sends on purpose:
 * headers and half a body, then nothing; or a request whose answer is never read. It keeps
 * what comes back as text and whether the peer closed the socket.
 */
import net from 'node:net';

export interface RawConnection {
  socket: net.Socket;
  /** Everything received so far (latin1, so byte offsets are kept). */
  answer(): string;
  closed(): boolean;
}

/** Connects to the host and port of `baseUrl` (e.g. the gateway's `url`). */
export async function rawConnect(baseUrl: string): Promise<RawConnection> {
  const { hostname, port } = new URL(baseUrl);
  const socket = net.connect(Number(port), hostname);
  let answer = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.on('close', () => (closed = true));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return { socket, answer: () => answer, closed: () => closed };
}

/** The head of an MCP POST to `path` announcing a body of `bodyLength` bytes. */
export function mcpPostHead(baseUrl: string, path: string, token: string, bodyLength: number, sessionId?: string): string {
  const { host } = new URL(baseUrl);
  const session = sessionId ? `mcp-session-id: ${sessionId}\r\nmcp-protocol-version: 2025-11-25\r\n` : '';
  return (
    `POST ${path} HTTP/1.1\r\nhost: ${host}\r\nauthorization: Bearer ${token}\r\n${session}` +
    `content-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: ${bodyLength}\r\n\r\n`
  );
}
