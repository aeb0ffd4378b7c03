/**
 * A virtual server (issue 31 §1, docs/virtual-servers.md): `/mcp/{name}`, an aggregated
 * endpoint over the backends its entries name, showing only the tools, prompts and resources
 * it selects, under the names and descriptions it gives them, with arguments fixed or hidden.
 *
 * It is the aggregated backend of `/mcp` (aggregated-backend.ts) with its members narrowed,
 * wrapped by a translation of names: a client's request is checked against the selection and
 * rewritten into the `/mcp` form (`{backend}__{tool}`, fixed arguments set), and list answers
 * are narrowed and renamed (virtual-lists.ts). Everything else is the aggregated layer's, so
 * sessions in the store (any replica), member streams and `Last-Event-ID`, linking (-32042, the
 * `connect` tool), token exchange, tool policy and audit — all of which see the real backend
 * and tool, since the members are the same policy-applied backend clients — and the 2026-07-28
 * bridge (src/stateless/, which reaches it as one more 2025-11-25 backend) work unchanged.
 * Answers to calls pass through untouched: the aggregated layer already made their URIs
 * (`{backend}+{uri}`, MCP Apps' `_meta.ui.resourceUri`) readable here. The members'
 * notifications are narrowed per member by the selection (`list_changed` from a member that
 * gives the server nothing of that kind, `resources/updated` of a resource it does not offer:
 * dropped) — cheap, as the aggregated layer parses each message anyway.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { collectMessages } from '../backends/backend-body.js';
import type { BackendConfig } from '../config/schema.js';
import type { ServerConfig } from '../config/servers-schema.js';
import type { LinkingContext } from '../linking/linking.js';
import { ErrorCode, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { isToolAllowed } from '../policy/tool-policy.js';
import { AggregatedBackend } from './aggregated-backend.js';
import { LIST_METHODS } from './lists.js';
import { splitName } from './names.js';
import { emptyResponse, errorReply, jsonResponse } from './responses.js';
import { decodeAggregateState } from './session-map.js';
import { virtualList } from './virtual-lists.js';
import { Selection } from './virtual-selection.js';
import { callArguments } from './virtual-tools.js';

type Json = Record<string, unknown>;
type Request = JsonRpcMessage & { id: JsonRpcId; method: string };

/** Requests whose params name no tool, prompt or resource: the aggregated layer's answer is the server's. */
const PASSED_ON = new Set(['ping', 'logging/setLevel', 'tasks/get', 'tasks/result', 'tasks/cancel']);

export class VirtualServer implements McpBackend {
  readonly name: string;
  readonly config: BackendConfig;
  readonly #inner: AggregatedBackend;
  readonly #selection: Selection;
  readonly #server: ServerConfig;
  readonly #backends: LinkingContext['backends'];

  constructor(ctx: LinkingContext, server: ServerConfig, index: number) {
    this.#server = server;
    this.#backends = ctx.backends;
    this.#selection = new Selection(server, index);
    const selection = this.#selection;
    this.#inner = new AggregatedBackend(ctx, { name: server.name, members: selection.backends, keeps: (backend, notification) => selection.keeps(backend, notification) });
    this.name = server.name;
    this.config = this.#inner.config;
  }

  async post(body: string, headers: BackendCallHeaders): Promise<BackendResponse> {
    const parsed = JSON.parse(body) as JsonRpcMessage | JsonRpcMessage[];
    if (!Array.isArray(parsed)) return this.#one(parsed, body, headers);
    // JSON-RPC batches (2025-03-26 sessions only): each message on its own, answers gathered.
    const answers: JsonRpcMessage[] = [];
    for (const message of parsed) {
      const res = await this.#one(message, JSON.stringify(message), headers);
      answers.push(...(await collectMessages(res)).messages.filter((m) => m.method === undefined));
    }
    return answers.length ? jsonResponse(answers) : emptyResponse(202);
  }

  get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#inner.get(headers, signal);
  }

  delete(headers: BackendCallHeaders): Promise<BackendResponse> {
    return this.#inner.delete(headers);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  #one(message: JsonRpcMessage, body: string, headers: BackendCallHeaders): Promise<BackendResponse> {
    // Responses to a member's requests and notifications name no selected item: as on `/mcp`.
    if (!isRequest(message) || PASSED_ON.has(message.method)) return this.#inner.post(body, headers);
    const request = message as Request;
    if (request.method === 'initialize') return this.#initialize(body, headers);
    if (LIST_METHODS[request.method]) return virtualList(this.#inner, this.#selection, headers, request);
    const rewritten = this.#rewrite(request, headers);
    if ('refused' in rewritten) return Promise.resolve(errorReply(request.id, ErrorCode.InvalidParams, rewritten.refused));
    if (rewritten.notFound) return Promise.resolve(errorReply(request.id, ErrorCode.MethodNotFound, `Method not found: ${request.method}`));
    return this.#inner.post(JSON.stringify(rewritten.message), request.method === 'tools/call' ? shownAs(headers, this.name, request) : headers);
  }

  /** The request in the `/mcp` form, or why the server refuses it (-32602 for what it does not offer). */
  #rewrite(request: Request, headers: BackendCallHeaders): { message: JsonRpcMessage; notFound?: false } | { refused: string } | { notFound: true } {
    const params = (request.params ?? {}) as Json;
    switch (request.method) {
      case 'tools/call': {
        const selected = this.#selection.toolByOffered(params.name);
        const config = selected && this.#backends.get(selected.backend)?.config;
        // A tool its backend's policy hides is unknown here too, and named as the client named it (the aggregated layer would name `{backend}__{tool}`).
        if (!selected || !config || !isToolAllowed(config, selected.name)) {
          if (this.#selection.isConnectTool(params.name) && this.#waitsForLink(params.name as string, headers)) return { message: request };
          return { refused: `Unknown tool: ${String(params.name)}` };
        }
        const args = callArguments(selected, params.arguments);
        if ('refused' in args) return args;
        return { message: { ...request, params: { ...params, name: selected.qualified, arguments: args.arguments } } };
      }
      case 'prompts/get': {
        const selected = this.#selection.promptByOffered(params.name);
        return selected ? { message: { ...request, params: { ...params, name: selected.qualified } } } : { refused: `Unknown prompt: ${String(params.name)}` };
      }
      case 'resources/read':
      case 'resources/subscribe':
      case 'resources/unsubscribe':
        return this.#selection.readsResource(params.uri) ? { message: request } : { refused: `Unknown resource: ${String(params.uri)}` };
      case 'completion/complete':
        return this.#completion(request, params);
      default:
        return { notFound: true };
    }
  }

  #completion(request: Request, params: Json): { message: JsonRpcMessage } | { refused: string } {
    const ref = (params.ref ?? {}) as Json;
    if (ref.type === 'ref/prompt') {
      const selected = this.#selection.promptByOffered(ref.name);
      return selected ? { message: { ...request, params: { ...params, ref: { ...ref, name: selected.qualified } } } } : { refused: `Unknown prompt: ${String(ref.name)}` };
    }
    return this.#selection.readsResource(ref.uri) ? { message: request } : { refused: `Unknown resource: ${String(ref.uri)}` };
  }

  /** The `connect` tool is the gateway's only while the member waits for the link; then the name is the backend's, and not selected. */
  #waitsForLink(qualified: string, headers: BackendCallHeaders): boolean {
    const backend = splitName(qualified)!.backend;
    try {
      return Boolean(decodeAggregateState(headers.sessionId).members[backend]?.pending);
    } catch {
      return false;
    }
  }

  /** The aggregated `initialize`, presented as this server: its name, title and instructions. */
  async #initialize(body: string, headers: BackendCallHeaders): Promise<BackendResponse> {
    const res = await this.#inner.post(body, headers);
    if (res.status !== 200 || res.contentType !== 'application/json') return res;
    const answer = JSON.parse(await res.body.text()) as JsonRpcMessage;
    const result = answer.result as Json | undefined;
    if (result) {
      const serverInfo = (result.serverInfo ?? {}) as Json;
      result.serverInfo = { ...serverInfo, name: this.#server.name, ...(this.#server.title ? { title: this.#server.title } : {}) };
      if (this.#server.instructions) result.instructions = this.#server.instructions;
    }
    const sessionHeaders = Object.fromEntries(Object.entries(res.headers).filter(([k, v]) => k !== 'content-type' && typeof v === 'string')) as Record<string, string>;
    return jsonResponse(answer, sessionHeaders);
  }
}

/**
 * A call's headers with the names the client saw on this server (BackendCaller.shownAs): a
 * held call's approval page shows them beside the real backend and tool (issue 46 §6). A copy
 * of the caller for this one call; the rest of the caller is the same.
 */
function shownAs(headers: BackendCallHeaders, server: string, request: Request): BackendCallHeaders {
  const caller = headers.caller;
  const tool = (request.params as Json | undefined)?.name;
  return caller && typeof tool === 'string' ? { ...headers, caller: { ...caller, shownAs: { server, tool } } } : headers;
}
