/**
 * Which HTTP stream a message from a stdio or legacy SSE backend belongs on.
 *
 * Why: Streamable HTTP (MCP 2025-11-25 "Transports") answers each POST on its own stream,
 * and server messages sent while a request is being handled SHOULD go on that request's
 * stream; anything else goes on the session's standalone GET stream. stdio and HTTP+SSE
 * (2024-11-05) have one channel and carry no such relation, so the bridge rebuilds it:
 *
 * - a response routes by its own id (the SDK server transport does that itself);
 * - a message with a progress token (`notifications/progress`, or any request/notification
 *   carrying `_meta.progressToken`) belongs to the client request that set that token
 *   (MCP "Progress": the token is chosen by the request's sender and echoed back);
 * - otherwise, when exactly one client request is open, the message is taken to belong to
 *   it (a tool that asks for sampling or elicitation, or logs while it runs, is the common
 *   case; the GET stream may not even be open, and a server→client request sent there
 *   would then be lost);
 * - otherwise it is unrelated and goes to the standalone GET stream.
 */
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';

interface OpenRequest {
  id: RequestId;
  progressToken?: string;
}

export class OpenRequests {
  readonly #byId = new Map<string, OpenRequest>();
  readonly #byProgressToken = new Map<string, RequestId>();

  get size(): number {
    return this.#byId.size;
  }

  /** A client request was handed to the backend. */
  opened(id: RequestId, params: unknown): void {
    const token = progressTokenOf(params);
    const entry: OpenRequest = { id, ...(token !== undefined ? { progressToken: token } : {}) };
    this.#byId.set(key(id), entry);
    if (token !== undefined) this.#byProgressToken.set(token, id);
  }

  /** The backend answered `id` (or it will never be answered). */
  closed(id: RequestId): void {
    const entry = this.#byId.get(key(id));
    if (!entry) return;
    this.#byId.delete(key(id));
    if (entry.progressToken !== undefined) this.#byProgressToken.delete(entry.progressToken);
  }

  has(id: RequestId): boolean {
    return this.#byId.has(key(id));
  }

  /** The requests still waiting for the backend's answer. */
  ids(): RequestId[] {
    return [...this.#byId.values()].map((e) => e.id);
  }

  /**
   * The `relatedRequestId` to send a backend message with: the request whose stream it
   * belongs on, or undefined for the standalone GET stream.
   */
  relate(message: JSONRPCMessage): RequestId | undefined {
    if ('id' in message && !('method' in message)) return message.id as RequestId;
    const params = 'params' in message ? message.params : undefined;
    const method = 'method' in message ? message.method : undefined;
    const token = method === 'notifications/progress' ? progressTokenValue((params as { progressToken?: unknown } | undefined)?.progressToken) : progressTokenOf(params);
    if (token !== undefined) {
      const id = this.#byProgressToken.get(token);
      if (id !== undefined) return id;
    }
    if (this.#byId.size === 1) return this.#byId.values().next().value!.id;
    return undefined;
  }
}

/** Ids are compared by type and value: `1` and `"1"` are different requests. */
function key(id: RequestId): string {
  return `${typeof id}:${id}`;
}

function progressTokenOf(params: unknown): string | undefined {
  const meta = (params as { _meta?: { progressToken?: unknown } } | undefined)?._meta;
  return progressTokenValue(meta?.progressToken);
}

function progressTokenValue(token: unknown): string | undefined {
  return typeof token === 'string' || typeof token === 'number' ? `${typeof token}:${token}` : undefined;
}
