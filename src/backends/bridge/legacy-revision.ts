/**
 * Presenting a 2024-11-05 backend to the gateway as a 2025-03-26 session.
 *
 * Why: the gateway speaks 2025-11-25, 2025-06-18 and 2025-03-26 (src/wire/protocol.ts) and
 * refuses a backend that negotiates anything else, but legacy HTTP+SSE servers — and many
 * stdio servers — built on older SDKs know only 2024-11-05: asked for 2025-11-25 they
 * answer `protocolVersion: "2024-11-05"` (MCP "Lifecycle", version negotiation). The bridge
 * therefore rewrites that answer, on its way to the gateway only, to 2025-03-26 — the
 * oldest revision the gateway speaks and the one message-wise closest to 2024-11-05 — and
 * keeps speaking 2024-11-05 to the backend, which never sees the rewrite.
 *
 * What differs between 2024-11-05 and 2025-03-26 at the message level (the 2025-03-26
 * changelog, https://modelcontextprotocol.io/specification/2025-03-26/changelog), and why
 * relaying is safe:
 *
 * - OAuth 2.1 authorization and the Streamable HTTP transport: transport matters, not
 *   messages. The gateway does the client side of both; the bridge speaks HTTP+SSE (or
 *   stdio) to the backend with the backend's static headers, never the client's token.
 * - JSON-RPC batching (added in 2025-03-26, removed again in 2025-06-18): a 2025-03-26
 *   client may POST an array. The gateway relays the body as it is, and the bridge's SDK
 *   StreamableHTTPServerTransport splits it (`onmessage` once per element; the answers
 *   go back on that POST's stream), so the bridge hands the backend single messages
 *   only — 2024-11-05 has no batches. A backend never sends one either.
 * - Tool annotations, audio content, the `message` field of `notifications/progress` and
 *   the `completions` capability are all additions. Nothing was removed or changed in
 *   meaning, so everything a 2024-11-05 backend sends is a valid 2025-03-26 message. In
 *   the other direction: tool annotations, audio in tool/prompt/resource results and
 *   progress messages are the server's to send; `completion/complete` has the same shape
 *   in 2024-11-05 (the capability only announces it) and a backend without it answers
 *   -32601 as before; a progress notification from the client with a `message` field
 *   carries an extra field that receivers ignore. One case is relayed as it is and may
 *   surprise a strict old server: a client answering the backend's `sampling/createMessage`
 *   with audio content (a 2024-11-05 server cannot ask for it, and SPEC §1 leaves results
 *   untouched).
 * - The MCP-Protocol-Version HTTP header (added by 2025-06-18,
 *   https://modelcontextprotocol.io/specification/2025-06-18/changelog; a server assumes
 *   2025-03-26 when it is absent) is a gateway↔bridge matter: the gateway sends the
 *   session's revision (2025-03-26), which the SDK server transport accepts. It is not
 *   passed on: the SDK's SSEClientTransport sends it only after `setProtocolVersion`,
 *   which the bridge never calls, and stdio has no headers — so a 2024-11-05 backend is
 *   never told a revision it did not negotiate.
 * - The later revisions' features (elicitation, structured output, resource links, tasks…)
 *   are not in play: the session is 2025-03-26, and the gateway's stream handling for it
 *   (no priming events; batches allowed) follows from the revision it stored. On the
 *   aggregated endpoint the client keeps its own revision with the gateway, which stores
 *   2025-03-26 for this member and sends it requests the same way.
 *
 * A backend that already negotiated a revision the gateway speaks is never rewritten. An
 * answer naming anything else — a string that is no known MCP revision, a revision newer
 * than the gateway knows, or no string at all — cannot be bridged: the bridge answers the
 * `initialize` with a JSON-RPC error instead (bridge-session.ts).
 */
import { isSupportedVersion, SUPPORTED_PROTOCOL_VERSIONS } from '../../wire/protocol.js';

/**
 * Published MCP revisions older than any the gateway speaks, which the bridge can present
 * as {@link BRIDGED_PROTOCOL_VERSION}. 2024-11-05 is the first published revision; the
 * pre-release "2024-10-07" that some SDKs still accept was never published and is refused.
 */
export const LEGACY_PROTOCOL_VERSIONS = ['2024-11-05'] as const;

/** What a legacy backend is presented as: the oldest revision the gateway speaks. */
export const BRIDGED_PROTOCOL_VERSION = '2025-03-26';

export type InitializeOutcome =
  /** The backend negotiated a revision the gateway speaks: relay unchanged. */
  | { kind: 'supported'; version: string }
  /** A legacy revision: relay `message`, whose `result.protocolVersion` is {@link BRIDGED_PROTOCOL_VERSION}. */
  | { kind: 'bridged'; backendVersion: string; message: Record<string, unknown> }
  /** Nothing the gateway can use: answer the initialize with an error. */
  | { kind: 'refused'; backendVersion: unknown };

/** Judges the backend's successful `initialize` response (a JSON-RPC message with `result`). */
export function presentInitializeResult(response: { result: unknown } & Record<string, unknown>): InitializeOutcome {
  const result = response.result as Record<string, unknown> | undefined;
  const version = result && typeof result === 'object' ? result.protocolVersion : undefined;
  if (typeof version !== 'string') return { kind: 'refused', backendVersion: version };
  if (isSupportedVersion(version)) return { kind: 'supported', version };
  if ((LEGACY_PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
    return { kind: 'bridged', backendVersion: version, message: { ...response, result: { ...result, protocolVersion: BRIDGED_PROTOCOL_VERSION } } };
  }
  return { kind: 'refused', backendVersion: version };
}

/** The text of the error a refused backend revision produces. */
export function refusalMessage(backend: string, version: unknown): string {
  const named = typeof version === 'string' ? `protocol version "${version.slice(0, 100)}"` : 'no protocol version';
  const usable = [...SUPPORTED_PROTOCOL_VERSIONS, ...LEGACY_PROTOCOL_VERSIONS].join(', ');
  return `backend "${backend}" negotiated ${named}, which the gateway cannot bridge (usable: ${usable})`;
}
