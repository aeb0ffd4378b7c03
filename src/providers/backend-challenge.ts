/**
 * The backend's own word on where its users authorize (MCP 2025-11-25 "Authorization",
 * §Protected Resource Metadata Discovery and §Scope Selection Strategy): a client learns it
 * from the `WWW-Authenticate` of the 401 its first MCP request gets — the
 * `resource_metadata` URL (RFC 9728 §5.1) and the `scope` to ask for. Discovery
 * (upstream-discovery.ts) therefore begins with that request: an `initialize` sent without
 * a token, through the SSRF guard like every discovery fetch (discovery-fetch.ts).
 *
 * A backend that answers it without a token (servers that let anyone connect) gives no
 * challenge: discovery goes on with the well-known URLs. A session it may have opened is
 * ended at once (best effort). Nothing here fails discovery: a probe that gets no answer is
 * a probe without a challenge.
 */
import { discoveryFetch, type DiscoveryOptions } from './discovery-fetch.js';

/** A probe needs no more than its status line and headers. */
const PROBE_TIMEOUT_MS = 5_000;
const PROBE_MAX_BODY = 64 * 1024;

/**
 * The `WWW-Authenticate` of the backend's 401 (or 403) to a token-less `initialize`, or
 * undefined when it answered otherwise or not at all.
 */
export async function backendChallenge(backendUrl: string, options: DiscoveryOptions = {}): Promise<string | undefined> {
  const probe = { ...options, timeoutMs: Math.min(options.timeoutMs ?? PROBE_TIMEOUT_MS, PROBE_TIMEOUT_MS) };
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'switchboard-discovery', version: '1' } },
  });
  let res: Response;
  try {
    res = await discoveryFetch(backendUrl, probe, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body, maxBodyBytes: PROBE_MAX_BODY }, 'authorization challenge');
  } catch {
    return undefined;
  }
  if (res.status === 401 || res.status === 403) return res.headers.get('www-authenticate') ?? undefined;
  const session = res.headers.get('mcp-session-id');
  if (session) {
    await discoveryFetch(backendUrl, probe, { method: 'DELETE', headers: { 'mcp-session-id': session } }, 'authorization challenge').catch(() => undefined);
  }
  return undefined;
}
