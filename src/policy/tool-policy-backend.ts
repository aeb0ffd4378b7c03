/**
 * The tool policy (SPEC §3 `backends[].tools`) as a face of the backend itself: a backend with
 * a policy is wrapped once, where backends are built (app.ts), so every path that calls it —
 * `/mcp/{backend}`, the members of the aggregated `/mcp`, WebSocket through either — hides
 * the same tools without knowing about the policy (tool-traffic.ts says how).
 *
 * A refusal never reaches the backend: the answer is made here and marked `refused`, so the
 * route can count it as rejected rather than relayed. Backends without a policy are not
 * wrapped and cost nothing.
 */
import type { BackendCaller, BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import type { Metrics } from '../ops/metrics.js';
import { parseMessages, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { hasToolPolicy } from './tool-policy.js';
import { applyToolPolicy, screenToolCalls } from './tool-traffic.js';

export class ToolPolicyBackend extends DecoratedBackend {
  constructor(
    inner: McpBackend,
    private readonly metrics: Metrics,
  ) {
    super(inner);
  }

  async post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const messages = messagesOf(body, headers.caller);
    if (!messages) return this.inner.post(body, headers, signal);
    const screened = screenToolCalls(this.metrics, headers.caller?.log, this.config, messages, body);
    if (screened.refusal) {
      return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(JSON.stringify(screened.refusal)), refused: true };
    }
    const res = await this.inner.post(screened.body, headers, signal);
    return applyToolPolicy(this.config, messages, res, { forwarded: screened.body, log: headers.caller?.log, metrics: this.metrics });
  }
}

/**
 * The messages the policy judges. Bodies reach a backend only after the route (or the
 * aggregated endpoint, which writes its own) has validated them; a body that does not parse
 * here is passed on untouched, as the backend would see it without a policy. Read-only: the
 * messages may be the route's own.
 */
export function messagesOf(body: string, caller?: BackendCaller): readonly JsonRpcMessage[] | undefined {
  // The route's parse of this very text (BackendCaller.parsed): one parse per request.
  if (caller?.parsed?.text === body) return caller.parsed.messages;
  try {
    return parseMessages(body, true);
  } catch {
    return undefined;
  }
}

/** Puts the tool policy in front of a backend that has one; any other is returned as it is. */
export function withToolPolicy(backend: McpBackend, metrics: Metrics): McpBackend {
  return hasToolPolicy(backend.config) ? new ToolPolicyBackend(backend, metrics) : backend;
}
