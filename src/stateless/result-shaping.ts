/**
 * What a 2026-07-28 client must find on every result the gateway relays, whoever produced it
 * (MCP 2026-07-28 "Key Changes" 8, "Caching"):
 *
 * - `resultType`: required on every result. A backend of the earlier era omits it, and the
 *   suite's own reference server forgets it on streamed results; the gateway, as the client's
 *   server, adds `"complete"` (wire/result-type.ts).
 * - `ttlMs` and `cacheScope` on the cacheable results (`tools/list`, `prompts/list`,
 *   `resources/list`, `resources/templates/list`, `resources/read`, and `server/discover`,
 *   whose versions are narrowed to those the gateway serves statelessly). `"public"` lets shared
 *   intermediaries and the client reuse the result across access tokens ("Caching" §Cache
 *   Scope), so the gateway never passes it on for a result that depends on who asks: a
 *   backend reached with the user's own account or an exchanged token, or one whose access or
 *   tool policy filters per user or tenant. A backend that sent no hints gets `ttlMs: 0`
 *   (the spec's default reading) and `"private"`.
 */
import { isAggregatedEndpoint } from '../aggregate/aggregated-backend.js';
import type { BackendConfig } from '../config/schema.js';
import { CACHEABLE_METHODS, withResultType, withResultTypeBytes, withResultTypeText } from '../wire/result-type.js';
import { narrowDiscover } from './discover.js';
import { parseObject } from '../backends/backend-messages.js';

/** True when every user of this backend sees the same answers, so the backend's own `"public"` may stand. */
export function sharesAnswersAcrossUsers(config: BackendConfig): boolean {
  const { access } = config;
  return (
    // `/mcp` and virtual servers answer with the backends each user may use.
    !isAggregatedEndpoint(config) &&
    !config.upstreamAuth &&
    !config.tokenExchange &&
    !access.scopes.length &&
    !access.tenants.length &&
    !Object.keys(access.claims).length &&
    !access.tools.allow.length &&
    !access.tools.deny.length
  );
}

/**
 * True when a result of `method` needs only `resultType`, which can be written in as its bytes
 * pass (wire/result-type-stream.ts), so a big one streams; a cacheable result's hints need the
 * whole message.
 */
export function streamsResults(method: string): boolean {
  return !CACHEABLE_METHODS.has(method);
}

/**
 * One message of the backend's answer to `method`, made a proper 2026 result: requests and
 * notifications pass as they are; an error passes; a result gets `resultType` and, when
 * cacheable, hints that do not over-share.
 */
export function shapeMessage(message: Record<string, unknown>, method: string, shared: boolean): Record<string, unknown> {
  const shaped = withResultType(message) as Record<string, unknown>;
  const result = shaped.result as Record<string, unknown> | undefined;
  if (!result || typeof result !== 'object' || !CACHEABLE_METHODS.has(method) || result.resultType !== 'complete') return shaped;
  if (method === 'server/discover') shaped.result = narrowDiscover(result);
  const cacheable = shaped.result as Record<string, unknown>;
  if (typeof cacheable.ttlMs !== 'number' || cacheable.ttlMs < 0) cacheable.ttlMs = 0;
  if (!(shared && cacheable.cacheScope === 'public')) cacheable.cacheScope = 'private';
  return shaped;
}

/** The same for a message in text form (a JSON answer body, an SSE event's data); text that is not one JSON object passes as it is. */
export function shapeMessageText(text: string, method: string, shared: boolean): string {
  // The hot path (`tools/call`): no hints to set, so `resultType` goes in without a parse where that is safe.
  if (!CACHEABLE_METHODS.has(method)) return withResultTypeText(text);
  const message = parseObject(text);
  return message ? JSON.stringify(shapeMessage(message, method, shared)) : text;
}

/** The same for a JSON answer body as bytes: the hot path (`tools/call`) shapes them undecoded. */
export function shapeMessageBytes(bytes: Buffer, method: string, shared: boolean): Buffer | string {
  if (!CACHEABLE_METHODS.has(method)) return withResultTypeBytes(bytes);
  return shapeMessageText(bytes.toString('utf8'), method, shared);
}
