/**
 * The backend's own word on where its users authorize (MCP 2025-11-25 "Authorization",
 * §Protected Resource Metadata Discovery and §Scope Selection Strategy): a client learns it
 * from the `WWW-Authenticate` of the 401 its MCP requests get — the `resource_metadata` URL
 * (RFC 9728 §5.1) and the `scope` to ask for. Discovery (upstream-discovery.ts) therefore
 * begins with what a client does first: an `initialize` sent without a token and, when the
 * backend admits that, a `tools/list` in the session it opened (many servers let anyone
 * initialize and challenge only later, as the conformance suite's `auth/scope-step-up` and
 * `auth/authorization-server-migration` servers do; issue 42 §8). Each goes through the SSRF
 * guard like every discovery fetch (discovery-fetch.ts).
 *
 * A backend that answers both without a token (servers that let anyone connect) gives no
 * challenge: discovery goes on with the well-known URLs. A session it opened is ended
 * (best effort). Nothing here fails discovery: a probe that gets no answer is a probe
 * without a challenge.
 */
import { discoveryFetch, type DiscoveryOptions } from './discovery-fetch.js';

/** A probe needs no more than its status line, headers and an initialize result. */
const PROBE_TIMEOUT_MS = 5_000;
const PROBE_MAX_BODY = 64 * 1024;
const PROBE_VERSION = '2025-11-25';
const ACCEPT = 'application/json, text/event-stream';

/**
 * The `WWW-Authenticate` of the backend's 401 (or 403) to a token-less `initialize`, or to
 * the `tools/list` after it; undefined when it answered both otherwise or not at all.
 */
export async function backendChallenge(backendUrl: string, options: DiscoveryOptions = {}): Promise<string | undefined> {
  const probe = { ...options, timeoutMs: Math.min(options.timeoutMs ?? PROBE_TIMEOUT_MS, PROBE_TIMEOUT_MS) };
  const post = (body: object, headers: Record<string, string> = {}) =>
    discoveryFetch(backendUrl, probe, { method: 'POST', headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers }, body: JSON.stringify(body), maxBodyBytes: PROBE_MAX_BODY }, 'authorization challenge');
  const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROBE_VERSION, capabilities: {}, clientInfo: { name: 'switchboard-discovery', version: '1' } } };
  const res = await post(initialize).catch(() => undefined);
  if (!res) return undefined;
  if (res.status === 401 || res.status === 403) return res.headers.get('www-authenticate') ?? undefined;
  if (res.status !== 200) return undefined;
  const session = res.headers.get('mcp-session-id');
  const version = /"protocolVersion"\s*:\s*"([^"\\]{1,40})"/.exec(await res.text().catch(() => ''))?.[1] ?? PROBE_VERSION;
  const headers: Record<string, string> = { 'mcp-protocol-version': version, ...(session ? { 'mcp-session-id': session } : {}) };
  try {
    await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    const listed = await post({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers);
    if (listed.status === 401 || listed.status === 403) return listed.headers.get('www-authenticate') ?? undefined;
    return undefined;
  } catch {
    return undefined;
  } finally {
    if (session) await discoveryFetch(backendUrl, probe, { method: 'DELETE', headers }, 'authorization challenge').catch(() => undefined);
  }
}
