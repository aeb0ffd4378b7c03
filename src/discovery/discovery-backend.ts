/**
 * Tool search on an aggregated endpoint (issue 31 §3, docs/tool-search.md): `/mcp` or a
 * virtual server with `discovery: { threshold: N }`. When the tools a user sees there are more
 * than N, `tools/list` answers `search_tools` and `call_tool` in their place, so a model's
 * context holds two tool definitions instead of hundreds; at N or fewer, nothing changes.
 *
 * It is a face over the endpoint's own backend (the aggregated backend of `/mcp`, or a virtual
 * server), put on once for both in mcp/build-context.ts, which is why it sees exactly what the
 * client would: the user's list, already filtered by tool policy and linking, under the names
 * the client calls. Everything it does not answer passes through untouched.
 *
 * - `tools/list` reads the user's whole list through the endpoint (user-lists.ts) and keeps it
 *   for searches; above N it answers the two tools, else the endpoint's own first page.
 * - `search_tools` ranks the kept list with the index of that list (tool-index.ts, shared by
 *   everyone who sees the same list): no backend round trip when the list is kept, one store
 *   read to know it is still the session's (replicas share which list is current).
 * - `call_tool` becomes the `tools/call` a client would send for that tool — same request id,
 *   same `_meta` (progress token, trace context) — and goes down the same path as a direct
 *   call: the members' tool policy, `policy.rules`, the audit record (naming the real backend
 *   and tool), pinning and linking (-32042, the `connect` tool) all see it as one.
 * - A tool found by search may also be called directly by its name: that is a plain `tools/call`.
 *
 * The threshold is read from the live config on every request, so a reload turns it on, off
 * or changes N; no key means this face does nothing but pass requests on.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { syntheticBody, withBody } from '../backends/body.js';
import type { BackendConfig } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import { ErrorCode, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { createSseReader } from '../wire/sse.js';
import { errorReply, jsonResponse } from '../aggregate/responses.js';
import { CALL_TOOL, callArguments, gatewayTools, SEARCH_TOOLS, searchArguments, searchResult } from './gateway-tools.js';
import { indexFor } from './tool-index.js';
import { readToolList, type ToolList, UserLists } from './user-lists.js';

type Json = Record<string, unknown>;
type Request = JsonRpcMessage & { id: JsonRpcId; method: string };

/** The endpoint's threshold now, from the live config; undefined when discovery is off. */
export type ThresholdOf = () => number | undefined;

export class DiscoveryBackend implements McpBackend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #inner: McpBackend;
  readonly #threshold: ThresholdOf;
  readonly #lists: UserLists;

  constructor(inner: McpBackend, threshold: ThresholdOf, store: StateStore) {
    this.#inner = inner;
    this.#threshold = threshold;
    this.name = inner.name;
    // The same object: it marks the endpoint as aggregated (answers per user) wherever that is asked.
    this.config = inner.config;
    this.#lists = new UserLists(inner.name, store);
  }

  async post(body: string, headers: BackendCallHeaders): Promise<BackendResponse> {
    const threshold = this.#threshold();
    // Only tools/list and tools/call concern search: anything else passes unparsed (the endpoint parses it anyway).
    if (threshold === undefined || !body.includes('tools/')) return this.#inner.post(body, headers);
    let message: JsonRpcMessage;
    try {
      message = JSON.parse(body) as JsonRpcMessage;
    } catch {
      return this.#inner.post(body, headers);
    }
    // Batches (2025-03-26 sessions only) pass as they are: search is for the current revisions.
    if (Array.isArray(message) || !isRequest(message)) return this.#inner.post(body, headers);
    if (message.method === 'tools/list' && (message.params as Json | undefined)?.cursor === undefined) return this.#list(message, headers, threshold);
    if (message.method === 'tools/call') {
      const name = (message.params as Json | undefined)?.name;
      if (name === SEARCH_TOOLS || name === CALL_TOOL) return this.#gatewayTool(message, headers, threshold);
    }
    return this.#inner.post(body, headers);
  }

  /** The standalone stream, watched for `tools/list_changed`: the session's kept list is then read again. */
  async get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const res = await this.#inner.get(headers, signal);
    if (this.#threshold() === undefined || res.status !== 200 || res.contentType !== 'text/event-stream') return res;
    const lists = this.#lists;
    const reader = createSseReader({
      onEvent: (data) => {
        if (data.includes('notifications/tools/list_changed')) lists.changed(headers).catch((err: Error) => headers.caller?.log.warn({ err: err.message }, 'tool search: a changed list could not be marked in the store'));
      },
    });
    const source = res.body;
    async function* watched(): AsyncGenerator<Buffer> {
      for await (const chunk of source) {
        reader.feed(chunk);
        yield chunk;
      }
    }
    return withBody(res, syntheticBody(watched()));
  }

  /** The gateway changed the endpoint's tools for everyone (a pin approval): every kept list is read again before its next search. */
  toolsChanged(): void {
    this.#lists.forgetAll();
  }

  delete(headers: BackendCallHeaders): Promise<BackendResponse> {
    return this.#inner.delete(headers);
  }

  close(graceMs?: number): Promise<void> {
    return this.#inner.close(graceMs);
  }

  async #list(request: Request, headers: BackendCallHeaders, threshold: number): Promise<BackendResponse> {
    const list = await readToolList(this.#inner, headers, request);
    if ('error' in list) return jsonResponse(list.error);
    await this.#lists.set(headers, list);
    if (list.tools.length <= threshold) return jsonResponse(list.first);
    return jsonResponse({ jsonrpc: '2.0', id: request.id, result: { tools: gatewayTools(list.tools.length) } });
  }

  /** The kept list, or the list read now (first search on this replica, or after a change). */
  async #userList(request: Request, headers: BackendCallHeaders): Promise<ToolList | { error: JsonRpcMessage }> {
    const kept = await this.#lists.get(headers);
    if (kept) return kept;
    const list = await readToolList(this.#inner, headers, { jsonrpc: '2.0', id: request.id, method: 'tools/list' });
    if (!('error' in list)) await this.#lists.set(headers, list);
    return list;
  }

  async #gatewayTool(request: Request, headers: BackendCallHeaders, threshold: number): Promise<BackendResponse> {
    const params = (request.params ?? {}) as Json;
    const list = await this.#userList(request, headers);
    if ('error' in list) return jsonResponse(list.error);
    // At or below the threshold the two tools are not offered: the name is the endpoint's to answer (unknown, or a tool of that name).
    if (list.tools.length <= threshold) return this.#inner.post(JSON.stringify(request), headers);
    if (params.name === SEARCH_TOOLS) {
      const args = searchArguments(params.arguments);
      if ('refused' in args) return errorReply(request.id, ErrorCode.InvalidParams, args.refused);
      const found = indexFor(list.digest, list.tools).search(args.query, args.limit);
      return jsonResponse({ jsonrpc: '2.0', id: request.id, result: searchResult(args.query, found) });
    }
    const call = callArguments(params.arguments);
    if ('refused' in call) return errorReply(request.id, ErrorCode.InvalidParams, call.refused);
    // The direct call of that tool, as the client would have sent it: same id, same _meta (progress token, trace context).
    const inner = { ...request, params: { ...params, name: call.name, arguments: call.arguments } };
    return this.#inner.post(JSON.stringify(inner), headers);
  }
}

/**
 * A pin approval (or a reload, reload/list-changes.ts) changed what `tools/list` answers on `/mcp` and the virtual servers: their
 * tool-search lists kept on this replica are read again at the next search, where before they
 * stood until the client's next `tools/list` or 60 s (user-lists.ts TTL_MS) — a 2026-07-28 client, whose
 * bridged session stream passes no `list_changed` of the approval, would otherwise search the
 * old list for up to a minute.
 */
export function forgetToolSearchLists(endpoints: Iterable<McpBackend>): void {
  for (const endpoint of endpoints) if (endpoint instanceof DiscoveryBackend) endpoint.toolsChanged();
}
